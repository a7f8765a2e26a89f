//! F-2/F-3: every (failure class × configured action × progress) combination and its recovery.

use polarsplit::internals::policy::{decide, FailureClass, Progress, Recovery};
use polarsplit::{Config, OnReplicaError, OnReplicaLoss, OnWaitTimeout};

use FailureClass::*;
use Recovery::*;

fn cfg(loss: OnReplicaLoss, timeout: OnWaitTimeout, err: OnReplicaError) -> Config {
    polarsplit_test_support::config(&[
        ("on_replica_loss", loss.as_str()),
        ("on_wait_timeout", timeout.as_str()),
        ("on_replica_error", err.as_str()),
    ])
}

#[derive(Clone, Copy, Debug)]
struct P {
    forwarded: bool,
    hidden: bool,
    in_txn: bool,
    gen_changed: bool,
    retries: u32,
}

const FRESH: P = P {
    forwarded: false,
    hidden: false,
    in_txn: false,
    gen_changed: false,
    retries: 0,
};

fn progress(p: P) -> Progress {
    Progress {
        result_forwarded: p.forwarded,
        in_hidden: p.hidden,
        in_txn: p.in_txn,
        generation_changed: p.gen_changed,
        reader_retries: p.retries,
    }
}

type Policies = (OnReplicaLoss, OnWaitTimeout, OnReplicaError);
type Row = (FailureClass, Policies, P, Recovery);

#[test]
fn f2_f3_recovery_table() {
    use OnReplicaError as E;
    use OnReplicaLoss as L;
    use OnWaitTimeout as T;
    let retried = P {
        retries: 1,
        ..FRESH
    };
    let forwarded = P {
        forwarded: true,
        ..FRESH
    };
    let hidden = P {
        hidden: true,
        ..FRESH
    };
    let split_gen = P {
        in_txn: true,
        gen_changed: true,
        ..FRESH
    };
    let d = (L::ReplicaThenPrimary, T::Primary, E::Primary);
    #[rustfmt::skip]
    let table: &[Row] = &[
        // CONNECTION_LOST
        (ConnectionLost, d, FRESH, RetryReader),
        (ConnectionLost, d, retried, RetryWriter),
        (ConnectionLost, d, forwarded, EngineError),
        (ConnectionLost, d, split_gen, EngineError),
        (ConnectionLost, (L::ReplicaThenError, d.1, d.2), FRESH, RetryReader),
        (ConnectionLost, (L::ReplicaThenError, d.1, d.2), retried, EngineError),
        (ConnectionLost, (L::Primary, d.1, d.2), FRESH, RetryWriter),
        (ConnectionLost, (L::Primary, d.1, d.2), split_gen, EngineError),
        (ConnectionLost, (L::Error, d.1, d.2), FRESH, EngineError),
        (ConnectionLost, (L::Disconnect, d.1, d.2), FRESH, Disconnect),
        (ConnectionLost, (L::Disconnect, d.1, d.2), forwarded, EngineError),
        // WAIT_TIMEOUT
        (WaitTimeout, d, FRESH, RetryWriter),
        (WaitTimeout, d, split_gen, EngineError),
        (WaitTimeout, (d.0, T::Error, d.2), FRESH, EngineError),
        (WaitTimeout, (d.0, T::Disconnect, d.2), FRESH, Disconnect),
        (WaitTimeout, (d.0, T::Warning, d.2), FRESH, RetryWriter),
        (WaitTimeout, d, forwarded, ForwardOriginal),
        // REUSABLE_ERROR
        (ReusableError, d, FRESH, RetryWriter),
        (ReusableError, d, hidden, RetryWriter),
        (ReusableError, d, split_gen, ForwardOriginal),
        (ReusableError, (d.0, d.1, E::Error), FRESH, ForwardOriginal),
        (ReusableError, (d.0, d.1, E::Error), hidden, EngineError),
        (ReusableError, (d.0, d.1, E::Disconnect), FRESH, Disconnect),
        (ReusableError, d, forwarded, ForwardOriginal),
        (ReusableError, (d.0, d.1, E::Disconnect), forwarded, ForwardOriginal),
        // A cancel is forwarded, whatever the policy.
        (Cancel, d, FRESH, ForwardOriginal),
        (Cancel, (L::Disconnect, T::Disconnect, E::Disconnect), FRESH, ForwardOriginal),
    ];
    for (class, (l, t, e), p, want) in table {
        let got = decide(*class, &progress(*p), &cfg(*l, *t, *e));
        assert_eq!(got, *want, "{class:?} with ({l:?}, {t:?}, {e:?}) and {p:?}");
    }
}
