//! The client's startup (W-1): what it asked for, the startup messages for backend connections of
//! each role, and the reader key (P-9).

use crate::classify::Isolation;
use crate::config::{Config, IdentityMode, StartupProfile};
use crate::pool::{
    ReaderKey, ReaderKeyBuilder, AUTHORIZATION_KEY, READER_CONFIGURATION_KEY, ROLE_KEY,
    SETTINGS_DIGEST_KEY,
};
use crate::protocol::encode;
use crate::protocol::startup::StartupParams;
use crate::protocol::RfqExtensions;

use super::state::SessionSettings;

/// Addresses the host knows about a client connection (W-1 identity modes).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientInfo {
    /// The real client's address (identity mode `client`).
    pub client_addr: Option<(String, u16)>,
    /// The proxy's own listener address (identity mode `proxy`).
    pub proxy_addr: Option<(String, u16)>,
    /// The writer hostgroup for this client (default: the configured one).
    pub writer_hostgroup: Option<u32>,
}

/// Backend connection roles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// The writer (primary): every statement that is not a replica-safe read.
    Writer,
    /// A reader (hot standby): replica-safe reads.
    Reader,
}

/// Startup parameters in the client's order, packed in one allocation as `name\0value\0`
/// pairs (names and values never contain a NUL: the framer splits on it).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Params(Box<[u8]>);

impl Params {
    fn push(out: &mut Vec<u8>, name: &[u8], value: &[u8]) {
        out.extend_from_slice(name);
        out.push(0);
        out.extend_from_slice(value);
        out.push(0);
    }

    /// `(name, value)` pairs, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&[u8], &[u8])> + Clone {
        let mut parts = self.0.split(|&b| b == 0);
        std::iter::from_fn(move || {
            let name = parts.next()?;
            let value = parts.next()?;
            Some((name, value))
        })
    }

    /// How many parameters there are.
    pub fn len(&self) -> usize {
        self.iter().count()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// What the client's StartupMessage said.
#[derive(Clone, Debug)]
pub struct Startup {
    /// The protocol major version the client asked for (3).
    pub major: u16,
    /// The protocol minor version the client asked for.
    pub minor: u16,
    /// Parameters in the client's order, without any `_polar_*` key.
    pub params: Params,
    /// The `user` parameter.
    pub user: Box<[u8]>,
    /// The `database` parameter (the user name when the client sent none, as PostgreSQL does).
    pub database: Box<[u8]>,
    /// `replication=` other than false/off/0/no: never routed.
    pub replication: bool,
    /// The client sent `_polar_send_lsn=1` / `_polar_proxy_send_lsn=1` itself (P-8).
    pub client_wants_lsn: bool,
    /// `default_transaction_isolation` from the parameters or `options`.
    pub default_isolation: Option<Isolation>,
    /// The profile actually used: the configured one, or `off` when the identity it needs is
    /// unknown (the server would refuse LSN reporting without it).
    pub profile: StartupProfile,
    /// The host and port the identity startup keys advertise (W-1); `None` when none is sent.
    pub identity: Option<(String, u16)>,
    /// `polarsplit.report_token=on` (C-1): the token as a ParameterStatus when it rises.
    pub report_token: bool,
    /// `polarsplit.causal_token=<token>` (C-2), as given; applied once the session is ready.
    /// (Boxed, not a `String`: the session's room for its S-4 names.)
    pub causal_token: Option<Box<str>>,
}

/// Splits `options` into its words: whitespace separates them unless escaped by `\`.
fn option_words(options: &[u8]) -> Vec<Vec<u8>> {
    let mut words = Vec::new();
    let mut cur = Vec::new();
    let mut escaped = false;
    for &b in options {
        if escaped {
            cur.push(b);
            escaped = false;
        } else if b == b'\\' {
            cur.push(b);
            escaped = true;
        } else if b.is_ascii_whitespace() {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
        } else {
            cur.push(b);
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// The `name=value` a `-c`/`--` option word sets, if it names one of the engine's own
/// (`polarsplit.*`) settings.
fn own_setting(assignment: &[u8]) -> Option<(String, String)> {
    let text = String::from_utf8_lossy(assignment).replace("\\ ", " ");
    let (name, value) = text.split_once('=')?;
    let name = name.replace('-', "_").to_ascii_lowercase();
    name.starts_with("polarsplit.")
        .then(|| (name, value.to_string()))
}

/// Removes the engine's own settings from an `options` value (C-2: they never reach a server
/// nor the reader key) and returns what they said.
fn strip_own_options(options: &[u8]) -> (Vec<u8>, Vec<(String, String)>) {
    let words = option_words(options);
    let mut kept: Vec<Vec<u8>> = Vec::new();
    let mut own = Vec::new();
    let mut i = 0;
    while i < words.len() {
        let w = &words[i];
        let (assignment, used) = if w.as_slice() == b"-c" {
            match words.get(i + 1) {
                Some(next) => (Some(next.as_slice()), 2),
                None => (None, 1),
            }
        } else if let Some(rest) = w.strip_prefix(b"--") {
            (Some(rest), 1)
        } else if let Some(rest) = w.strip_prefix(b"-c") {
            (Some(rest), 1)
        } else {
            (None, 1)
        };
        match assignment.and_then(own_setting) {
            Some(s) => own.push(s),
            None => kept.extend(words[i..i + used].iter().cloned()),
        }
        i += used;
    }
    (kept.join(&b' '), own)
}

fn truthy(v: &[u8]) -> bool {
    !matches!(
        v.to_ascii_lowercase().as_slice(),
        b"" | b"0" | b"false" | b"off" | b"no"
    )
}

/// Finds `default_transaction_isolation` in an `options` value (`-c name=value` or
/// `--name=value`, with `\ ` escaping spaces).
fn isolation_from_options(options: &[u8]) -> Option<Isolation> {
    let text = String::from_utf8_lossy(options).replace("\\ ", "\u{0}");
    let mut words = text.split_ascii_whitespace().peekable();
    let mut found = None;
    while let Some(w) = words.next() {
        let assignment = if w == "-c" {
            words.next().map(str::to_string)
        } else if let Some(rest) = w.strip_prefix("--") {
            Some(rest.to_string())
        } else {
            w.strip_prefix("-c").map(str::to_string)
        };
        if let Some(a) = assignment {
            if let Some((name, value)) = a.split_once('=') {
                if name
                    .replace('-', "_")
                    .eq_ignore_ascii_case("default_transaction_isolation")
                {
                    found = Isolation::parse(&value.replace('\u{0}', " "));
                }
            }
        }
    }
    found
}

impl Startup {
    pub(crate) fn from_params(
        major: u16,
        minor: u16,
        params: &StartupParams<'_>,
        config: &Config,
        info: &ClientInfo,
    ) -> Startup {
        let mut s = Startup {
            major,
            minor,
            params: Params::default(),
            user: Box::default(),
            database: Box::default(),
            replication: false,
            client_wants_lsn: false,
            default_isolation: None,
            profile: StartupProfile::Off,
            identity: None,
            report_token: false,
            causal_token: None,
        };
        let mut own = Vec::new();
        let mut kept_params = Vec::new();
        for (k, v) in params.iter() {
            if k.starts_with(b"_polar_") {
                if (k == b"_polar_send_lsn" || k == b"_polar_proxy_send_lsn") && truthy(v) {
                    s.client_wants_lsn = true;
                }
                continue;
            }
            if k.starts_with(b"polarsplit.") {
                // The engine's own settings given as startup parameters (C-1, C-2).
                own.push((
                    String::from_utf8_lossy(k).to_ascii_lowercase(),
                    String::from_utf8_lossy(v).into_owned(),
                ));
                continue;
            }
            if k == b"options" {
                let (kept, mine) = strip_own_options(v);
                own.extend(mine);
                if let Some(i) = isolation_from_options(&kept) {
                    s.default_isolation = Some(i);
                }
                if !kept.is_empty() {
                    Params::push(&mut kept_params, k, &kept);
                }
                continue;
            }
            match k {
                b"user" => s.user = v.into(),
                b"database" => s.database = v.into(),
                b"replication" => s.replication = truthy(v),
                b"default_transaction_isolation" => {
                    s.default_isolation = Isolation::parse(&String::from_utf8_lossy(v))
                }
                _ => {}
            }
            Params::push(&mut kept_params, k, v);
        }
        s.params = Params(kept_params.into_boxed_slice());
        for (name, value) in own {
            match name.as_str() {
                crate::token::REPORT_OPTION => {
                    s.report_token = matches!(
                        value.to_ascii_lowercase().as_str(),
                        "on" | "true" | "1" | "yes"
                    )
                }
                crate::token::SETTING => s.causal_token = Some(value.into_boxed_str()),
                _ => {}
            }
        }
        if s.database.is_empty() {
            s.database = s.user.clone();
        }
        s.identity = match config.identity_mode {
            IdentityMode::Client => info.client_addr.clone(),
            IdentityMode::Proxy => info.proxy_addr.clone(),
            IdentityMode::Configured => config.identity_host.clone().zip(config.identity_port),
        };
        s.profile = match (config.startup_profile, &s.identity) {
            (StartupProfile::Off, _) | (_, None) => StartupProfile::Off,
            (p, Some(_)) => p,
        };
        s
    }

    /// The RFQ extensions a backend connection of `role` gets (W-1, W-2). Internal: the wire
    /// codec's types are not part of the API.
    #[doc(hidden)]
    pub fn extensions(&self, role: Role) -> RfqExtensions {
        let lsn = self.profile.reports_lsn();
        RfqExtensions {
            lsn,
            xact: lsn && role == Role::Writer,
        }
    }

    /// The W-1 keys for a backend connection of `role`.
    pub fn role_keys(&self, role: Role) -> Vec<(&'static [u8], Vec<u8>)> {
        let Some((host, port)) = &self.identity else {
            return Vec::new();
        };
        let (lsn, xact, h, p): (&[u8], &[u8], &[u8], &[u8]) = match self.profile {
            StartupProfile::Off => return Vec::new(),
            StartupProfile::V15 => (
                b"_polar_proxy_send_lsn",
                b"_polar_proxy_send_xact",
                b"_polar_proxy_client_host",
                b"_polar_proxy_client_port",
            ),
            StartupProfile::Legacy => (
                b"_polar_send_lsn",
                b"_polar_send_xact",
                b"_polar_origin_client_ip",
                b"_polar_origin_client_port",
            ),
        };
        let mut keys = vec![(lsn, b"1".to_vec())];
        if role == Role::Writer {
            keys.push((xact, b"1".to_vec()));
        }
        keys.push((h, host.as_bytes().to_vec()));
        keys.push((p, port.to_string().into_bytes()));
        keys
    }

    /// A complete StartupMessage for a backend connection of `role`: the client's parameters
    /// (without `_polar_*` keys) and the role's W-1 keys.
    pub fn encode_for(&self, role: Role, out: &mut Vec<u8>) {
        let keys = self.role_keys(role);
        let params = self
            .params
            .iter()
            .chain(keys.iter().map(|(k, v)| (*k, v.as_slice())));
        encode::startup_message(out, self.major, self.minor, params);
    }

    /// Placeholder settings (`app.tenant`) the startup sets, in `options` (`-c name=value`) or
    /// as parameters: the capture asks for them by name (S-5).
    pub fn custom_names(&self) -> impl Iterator<Item = &[u8]> {
        self.params.iter().flat_map(|(k, v)| {
            let mut names: Vec<&[u8]> = Vec::new();
            if k == b"options" {
                for word in v.split(|b| b.is_ascii_whitespace()) {
                    let w = word.strip_prefix(b"-c").unwrap_or(word);
                    let w = w.strip_prefix(b"--").unwrap_or(w);
                    if let Some(eq) = w.iter().position(|&b| b == b'=') {
                        if w[..eq].contains(&b'.') {
                            names.push(&w[..eq]);
                        }
                    }
                }
            } else if k.contains(&b'.') {
                names.push(k);
            }
            names
        })
    }

    /// P-9: the key a reader connection for this session must have: user and database, the
    /// advertised identity, the startup parameters and the writer session's captured state
    /// (S-5) — equal keys mean equal connection states.
    pub(crate) fn reader_key(
        &self,
        profile_generation: u64,
        reader_conf_epoch: u64,
        settings: &SessionSettings,
    ) -> ReaderKey {
        // One mechanism: the builder a host uses for its own connections (P-9), given what a
        // reader connection of this session is opened with — the StartupMessage's parameters,
        // the W-1 keys of the profile among them — and the state the session set since.
        let keys = self.role_keys(Role::Reader);
        let mut b = ReaderKeyBuilder::new(profile_generation, &self.user, &self.database);
        if let Some((host, port)) = &self.identity {
            b.identity(self.profile.reports_lsn(), host.as_bytes(), *port);
        }
        for (k, v) in self
            .params
            .iter()
            .chain(keys.iter().map(|(k, v)| (*k, v.as_slice())))
        {
            b.startup_param(k, v);
        }
        for (name, value) in settings.iter() {
            b.setting(name, value);
        }
        if let Some(a) = &settings.authorization {
            b.setting(AUTHORIZATION_KEY, a);
        }
        if let Some(r) = &settings.role {
            b.setting(ROLE_KEY, r);
        }
        if let Some(d) = settings.digest() {
            b.setting(SETTINGS_DIGEST_KEY, d);
        }
        // S-5: a standby's configuration reload (as the host's monitor reported it) changes
        // every key: connections pooled before it are not handed out again.
        let epoch = reader_conf_epoch.to_string();
        if reader_conf_epoch > 0 {
            b.setting(READER_CONFIGURATION_KEY, epoch.as_bytes());
        }
        b.build()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::startup::{StartupPacket, PROTOCOL_3_0};

    fn parse(params: &[u8]) -> Vec<u8> {
        let mut v = PROTOCOL_3_0.to_be_bytes().to_vec();
        v.extend_from_slice(params);
        v
    }

    fn startup(params: &[u8], config: &Config, info: &ClientInfo) -> Startup {
        let body = parse(params);
        match StartupPacket::parse(&body).unwrap() {
            StartupPacket::Startup {
                major,
                minor,
                params,
            } => Startup::from_params(major, minor, &params, config, info),
            _ => unreachable!(),
        }
    }

    fn info() -> ClientInfo {
        ClientInfo {
            client_addr: Some(("10.1.2.3".into(), 5555)),
            proxy_addr: Some(("127.0.0.1".into(), 6432)),
            writer_hostgroup: None,
        }
    }

    #[test]
    fn w1_client_polar_keys_are_stripped_and_remembered() {
        let c = Config::defaults();
        let s = startup(
            b"user\0u\0_polar_send_lsn\x001\0database\0d\0\0",
            &c,
            &info(),
        );
        assert!(s.client_wants_lsn);
        assert!(s.params.iter().all(|(k, _)| !k.starts_with(b"_polar_")));
        assert_eq!(s.params.len(), 2);
    }

    #[test]
    fn w1_v15_writer_and_reader_keys() {
        let c = Config::defaults();
        let s = startup(b"user\0u\0\0", &c, &info());
        let mut out = Vec::new();
        s.encode_for(Role::Writer, &mut out);
        match StartupPacket::parse(&out[4..]).unwrap() {
            StartupPacket::Startup { params, .. } => {
                assert_eq!(params.get("_polar_proxy_send_lsn"), Some(&b"1"[..]));
                assert_eq!(params.get("_polar_proxy_send_xact"), Some(&b"1"[..]));
                assert_eq!(
                    params.get("_polar_proxy_client_host"),
                    Some(&b"10.1.2.3"[..])
                );
                assert_eq!(params.get("_polar_proxy_client_port"), Some(&b"5555"[..]));
            }
            _ => unreachable!(),
        }
        let keys = s.role_keys(Role::Reader);
        assert!(keys
            .iter()
            .all(|(k, _)| *k != &b"_polar_proxy_send_xact"[..]));
        assert_eq!(
            s.extensions(Role::Writer),
            RfqExtensions {
                lsn: true,
                xact: true
            }
        );
        assert_eq!(
            s.extensions(Role::Reader),
            RfqExtensions {
                lsn: true,
                xact: false
            }
        );
    }

    #[test]
    fn w1_legacy_and_proxy_identity() {
        let c = Config {
            startup_profile: StartupProfile::Legacy,
            identity_mode: IdentityMode::Proxy,
            ..Config::defaults()
        };
        let s = startup(b"user\0u\0\0", &c, &info());
        let keys: Vec<_> = s
            .role_keys(Role::Writer)
            .into_iter()
            .map(|(k, v)| (k.to_vec(), v))
            .collect();
        assert!(keys.contains(&(b"_polar_send_lsn".to_vec(), b"1".to_vec())));
        assert!(keys.contains(&(b"_polar_origin_client_ip".to_vec(), b"127.0.0.1".to_vec())));
        assert!(keys.contains(&(b"_polar_origin_client_port".to_vec(), b"6432".to_vec())));
    }

    #[test]
    fn w1_no_identity_means_no_keys() {
        let c = Config::defaults();
        let s = startup(b"user\0u\0\0", &c, &ClientInfo::default());
        assert_eq!(s.profile, StartupProfile::Off);
        assert!(s.role_keys(Role::Writer).is_empty());
        assert_eq!(s.extensions(Role::Writer), RfqExtensions::default());
    }

    #[test]
    fn s3_default_isolation_from_startup() {
        let c = Config::defaults();
        let s = startup(
            b"user\0u\0options\0-c default_transaction_isolation=repeatable\\ read\0\0",
            &c,
            &info(),
        );
        assert_eq!(s.default_isolation, Some(Isolation::RepeatableRead));
        let s = startup(
            b"user\0u\0default_transaction_isolation\0serializable\0\0",
            &c,
            &info(),
        );
        assert_eq!(s.default_isolation, Some(Isolation::Serializable));
        let s = startup(
            b"user\0u\0options\0--default-transaction-isolation=serializable\0\0",
            &c,
            &info(),
        );
        assert_eq!(s.default_isolation, Some(Isolation::Serializable));
    }

    #[test]
    fn c2_token_options_are_taken_out_of_what_servers_see() {
        let c = Config::defaults();
        let s = startup(
            b"user\0u\0options\0-c polarsplit.causal_token=ps1:1.2:0/10 --search_path=a\\ b -cpolarsplit.report_token=on\0polarsplit.report_token\0off\0\0",
            &c,
            &info(),
        );
        assert_eq!(s.causal_token.as_deref(), Some("ps1:1.2:0/10"));
        assert!(!s.report_token, "the later parameter wins");
        let opts = s
            .params
            .iter()
            .find(|(k, _)| k == b"options")
            .map(|(_, v)| v.to_vec());
        assert_eq!(opts.as_deref(), Some(&b"--search_path=a\\ b"[..]));
        assert!(s.params.iter().all(|(k, _)| !k.starts_with(b"polarsplit.")));
        // Only engine settings: no options parameter at all.
        let s = startup(
            b"user\0u\0options\0-c polarsplit.report_token=on\0\0",
            &c,
            &info(),
        );
        assert!(s.report_token);
        assert!(s.params.iter().all(|(k, _)| k != b"options"));
    }

    #[test]
    fn p9_key_separates_users_databases_settings_and_profiles() {
        let c = Config::defaults();
        let a = startup(b"user\0u\0database\0d\0\0", &c, &info());
        let b = startup(b"user\0v\0database\0d\0\0", &c, &info());
        let d = startup(b"user\0u\0database\0e\0\0", &c, &info());
        let none = SessionSettings::default();
        let ka = a.reader_key(1, 0, &none);
        assert_ne!(ka, b.reader_key(1, 0, &none));
        assert_ne!(ka, d.reader_key(1, 0, &none));
        assert_ne!(ka, a.reader_key(2, 0, &none));
        let mut set = SessionSettings::default();
        set.replace(
            vec![(b"search_path".to_vec().into(), b"x".to_vec().into())],
            None,
            None,
            None,
        );
        assert_ne!(ka, a.reader_key(1, 0, &set));
        let mut role = SessionSettings::default();
        role.replace(vec![], None, Some(b"reporting".to_vec().into()), None);
        assert_ne!(ka, a.reader_key(1, 0, &role));
        assert_ne!(a.reader_key(1, 0, &set), a.reader_key(1, 0, &role));
        assert_eq!(ka, a.reader_key(1, 0, &SessionSettings::default()));
        // Parameter order does not matter.
        let swapped = startup(b"database\0d\0user\0u\0\0", &c, &info());
        assert_eq!(ka, swapped.reader_key(1, 0, &none));
    }
}
