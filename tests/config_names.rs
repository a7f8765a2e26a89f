//! Every name in SETTING_NAMES is accepted by ConfigBuilder::set (a name listed but not wired
//! would be refused as unknown).

use polarsplit::{ConfigBuilder, SETTING_NAMES};

#[test]
fn s8_every_listed_setting_is_settable() {
    let sample = |name: &str| -> &'static str {
        match name {
            "consistency" => "global",
            "txn_split" | "lsn_probe" => "off",
            "on_wait_timeout" | "on_replica_error" | "on_missing_lsn" | "read_fallback" => "error",
            "on_replica_loss" => "primary",
            "startup_profile" => "legacy",
            "server_dialect" => "polardb",
            "identity_mode" => "proxy",
            "identity_host" => "10.0.0.1",
            "server_default_isolation" => "read committed",
            "write_functions" => "audit_*",
            "read_functions" => "report_*",
            "unknown_functions" => "replica",
            "warmup" => "demand",
            "max_inspected_message_bytes" => "65536",
            "writer_hostgroup" => "7",
            "reader_hostgroup" => "8",
            "max_batch_bytes" => "131072",
            "reader_response_timeout_ms" => "20000",
            "custom_settings" => "app.tenant, app.user_id",
            "capture_after_dml" => "on",
            "wal_block_size" => "16384",
            "wal_segment_size" => "67108864",
            _ => "3",
        }
    };
    for name in SETTING_NAMES {
        let mut b = ConfigBuilder::new();
        b.set(name, sample(name))
            .unwrap_or_else(|e| panic!("{name} is listed but refused: {e}"));
    }
}
