//! The parallel input for libpq-based hosts (SPEC §0): backend messages as parsed facts.

use super::handle::{slice, Growable};
use super::status::{PolarsplitStatus, POLARSPLIT_ERR_INVALID_ARGUMENT};
use crate::protocol::{Lsn, LsnField, Marker, TxStatus};
use crate::session::BackendFact;

/// Fact kinds (`polarsplit_backend_fact.kind`).
pub type PolarsplitFactKind = u32;
/// ReadyForQuery (`status`, `lsn_state`, `lsn`, `marker`, `xids`).
pub const POLARSPLIT_FACT_READY_FOR_QUERY: PolarsplitFactKind = 1;
/// CommandComplete (`text`: the tag).
pub const POLARSPLIT_FACT_COMMAND_COMPLETE: PolarsplitFactKind = 2;
/// ErrorResponse (`fields`).
pub const POLARSPLIT_FACT_ERROR: PolarsplitFactKind = 3;
/// NoticeResponse (`fields`).
pub const POLARSPLIT_FACT_NOTICE: PolarsplitFactKind = 4;
/// ParameterStatus (`text`: the name, `value`).
pub const POLARSPLIT_FACT_PARAMETER_STATUS: PolarsplitFactKind = 5;
/// Any other message, by its type byte in `tag` (rows, descriptions, COPY data…).
pub const POLARSPLIT_FACT_OTHER: PolarsplitFactKind = 6;

/// `polarsplit_backend_fact.lsn_state`: the RFQ carried no LSN (SPEC W-2 *missing*).
pub const POLARSPLIT_LSN_MISSING: u32 = 0;
/// The RFQ carried an LSN of 0 (*present-zero*).
pub const POLARSPLIT_LSN_ZERO: u32 = 1;
/// The RFQ carried the LSN in `lsn`.
pub const POLARSPLIT_LSN_AT: u32 = 2;

/// One ErrorResponse/NoticeResponse field. Frozen for ABI 3 (an array element).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PolarsplitErrorField {
    /// The field code ('S', 'V', 'C', 'M', 'D', 'R', …).
    pub code: u8,
    /// The value's bytes (no terminating NUL needed).
    pub value: *const u8,
    /// The value's length.
    pub value_len: usize,
}

/// One backend message as parsed facts. Fields not used by `kind` are ignored. Grows at the end:
/// `polarsplit_session_recv_backend_fact` takes the host's `sizeof`; a field appended later reads
/// as 0 for an older host.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PolarsplitBackendFact {
    /// What the message is (`POLARSPLIT_FACT_*`).
    pub kind: PolarsplitFactKind,
    /// READY_FOR_QUERY: 'I', 'T' or 'E'.
    pub status: u8,
    /// READY_FOR_QUERY: `POLARSPLIT_LSN_*`.
    pub lsn_state: u32,
    /// READY_FOR_QUERY: the LSN, when `lsn_state` is `POLARSPLIT_LSN_AT`.
    pub lsn: u64,
    /// READY_FOR_QUERY: 0 (no marker), 'x' or 'w' (SPEC W-2).
    pub marker: u8,
    /// READY_FOR_QUERY: the raw XID list after the marker (SPEC W-3).
    pub xids: *const u8,
    /// Its length.
    pub xids_len: usize,
    /// COMMAND_COMPLETE: the tag. PARAMETER_STATUS: the name.
    pub text: *const u8,
    /// Its length.
    pub text_len: usize,
    /// PARAMETER_STATUS: the value.
    pub value: *const u8,
    /// Its length.
    pub value_len: usize,
    /// ERROR / NOTICE: the fields.
    pub fields: *const PolarsplitErrorField,
    /// How many fields.
    pub fields_len: usize,
    /// OTHER: the message type byte.
    pub tag: u8,
}

// SAFETY: repr(C) integers and raw pointers.
unsafe impl Growable for PolarsplitBackendFact {
    const BASE_SIZE: usize = std::mem::size_of::<PolarsplitBackendFact>();
}

/// ERROR/NOTICE fields as (code, value) pairs.
pub(crate) type Fields<'a> = Vec<(u8, &'a [u8])>;

/// The fields of an ERROR/NOTICE fact.
///
/// # Safety
/// `f`'s pointers must be NULL (with a zero length) or point to their lengths of readable
/// fields and bytes.
pub(crate) unsafe fn fact_fields<'a>(
    f: &PolarsplitBackendFact,
) -> Result<Fields<'a>, PolarsplitStatus> {
    // SAFETY: as documented.
    let raw = unsafe { slice(f.fields, f.fields_len) }?;
    raw.iter()
        // SAFETY: each value is NULL (length 0) or readable for its length.
        .map(|x| Ok((x.code, unsafe { slice(x.value, x.value_len) }?)))
        .collect()
}

/// The Rust fact for a C fact. `fields` holds the ERROR/NOTICE fields (see [`fact_fields`]).
///
/// # Safety
/// `f`'s pointers must be NULL (with a zero length) or point to their lengths of readable bytes.
pub(crate) unsafe fn fact_from_c<'a>(
    f: &PolarsplitBackendFact,
    fields: &'a [(u8, &'a [u8])],
) -> Result<BackendFact<'a>, PolarsplitStatus> {
    // SAFETY: as documented.
    let text = unsafe { slice(f.text, f.text_len) }?;
    Ok(match f.kind {
        POLARSPLIT_FACT_READY_FOR_QUERY => {
            let status = TxStatus::from_byte(f.status).ok_or(POLARSPLIT_ERR_INVALID_ARGUMENT)?;
            let lsn = match f.lsn_state {
                POLARSPLIT_LSN_MISSING => LsnField::Missing,
                POLARSPLIT_LSN_ZERO => LsnField::Zero,
                POLARSPLIT_LSN_AT if f.lsn != 0 => LsnField::At(Lsn(f.lsn)),
                POLARSPLIT_LSN_AT => LsnField::Zero,
                _ => return Err(POLARSPLIT_ERR_INVALID_ARGUMENT),
            };
            // SAFETY: as documented.
            let xids = unsafe { slice(f.xids, f.xids_len) }?;
            let xact = match f.marker {
                0 => None,
                b'x' => Some((Marker::Splittable, xids)),
                b'w' => Some((Marker::WalPending, xids)),
                _ => return Err(POLARSPLIT_ERR_INVALID_ARGUMENT),
            };
            BackendFact::ReadyForQuery { status, lsn, xact }
        }
        POLARSPLIT_FACT_COMMAND_COMPLETE => BackendFact::CommandComplete { tag: text },
        POLARSPLIT_FACT_ERROR => BackendFact::Error { fields },
        POLARSPLIT_FACT_NOTICE => BackendFact::Notice { fields },
        POLARSPLIT_FACT_PARAMETER_STATUS => BackendFact::ParameterStatus {
            name: text,
            // SAFETY: as documented.
            value: unsafe { slice(f.value, f.value_len) }?,
        },
        POLARSPLIT_FACT_OTHER => BackendFact::Other { tag: f.tag },
        _ => return Err(POLARSPLIT_ERR_INVALID_ARGUMENT),
    })
}
