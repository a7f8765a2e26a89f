//! Every name this crate takes from `polarsplit`, in one place: when the engine's public API
//! changes, this is the file to fix (the rest of the crate imports from here).

pub use polarsplit::cluster::readers::ServerId;
pub use polarsplit::config::Config;
pub use polarsplit::host::{ContractError, Streams};
pub use polarsplit::pool::ReaderKey;
pub use polarsplit::protocol::rfq::{LsnField, Marker, TxStatus};
pub use polarsplit::protocol::{
    frame, AuthRequest, BackendMessage, FrontendMessage, Limits, RfqExtensions,
};
pub use polarsplit::session::{Action, ClientInfo, ConnId, Decision, Event, Session, SessionError};
pub use polarsplit::Engine;
