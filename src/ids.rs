//! Identifiers shared by every layer: the host's connection ids, server ids and hostgroups.
//! A leaf module (it depends on nothing), so that `cluster`, `pool` and `session` can all name
//! them without depending on each other.

/// The host's own id for a backend connection.
pub type ConnId = u64;

/// A server, as the host numbers it.
pub type ServerId = u32;

/// A numbered set of servers (ProxySQL's term): one writer hostgroup, one reader hostgroup.
pub type Hostgroup = u32;
