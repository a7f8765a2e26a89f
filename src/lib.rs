//! polarsplit: the read/write-splitting brain a PostgreSQL proxy embeds.
#![deny(unsafe_op_in_unsafe_fn)]

pub mod classify;
