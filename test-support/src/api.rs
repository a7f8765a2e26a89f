//! Every name this crate takes from `polarsplit`, in one place: when the engine's public API
//! changes, this is the file to fix (the rest of the crate imports from here).

pub use polarsplit::internals::protocol::{
    frame, AuthRequest, BackendMessage, FrontendMessage, RfqExtensions,
};
pub use polarsplit::{
    Action, ClientInfo, Config, ConnId, ContractError, Decision, Engine, Event, Limits, LsnField,
    Marker, ReaderKey, ServerId, Session, SessionError, Streams, TxStatus,
};
