//! The one idiom of the C boundary: how an exported function turns raw pointers into checked
//! Rust values, inside a panic boundary (after rustls-ffi's `Castable`, `try_ref_from_ptr!` and
//! `ffi_panic_boundary!`).
//!
//! Every exported function has the same shape:
//!
//! ```ignore
//! #[no_mangle]
//! pub unsafe extern "C" fn polarsplit_thing_do(thing: *mut PolarsplitThing, out: *mut u64) -> PolarsplitStatus {
//!     boundary! {
//!         let thing = try_mut!(thing);   // NULL → ERR_NULL; unusable (poisoned) → its status
//!         let mut out = try_out!(out);   // NULL → ERR_NULL
//!         out.set(thing.inner.value());
//!         POLARSPLIT_OK
//!     }
//! }
//! ```
//!
//! - [`boundary!`] runs the body under `catch_unwind`: a panic becomes `POLARSPLIT_ERR_PANIC` (or
//!   NULL, 0, `false`: the function's [`Fallback`]).
//! - [`try_ref!`] gives shared access to a handle (a [`Castable`]); [`try_mut!`] exclusive access,
//!   refused when the handle is unusable (a poisoned session) and poisoning it when a panic unwinds
//!   through the call.
//! - [`try_arg!`] unwraps any `Result<_, PolarsplitStatus>` argument check (`out`, `bytes`, `text`,
//!   `read_sized`, …), returning the error as the function's [`Fallback`].
//!
//! SAFETY of the macros: each wraps an `unsafe` call on a pointer that is an argument of the
//! exported function it is used in; that function's `# Safety` section (copied into the header)
//! states what the host promises about it: NULL or valid, of the documented length, not used
//! concurrently where exclusive.

use std::ffi::{c_char, CStr};
use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

use super::status::{PolarsplitStatus, POLARSPLIT_ERR_ABI, POLARSPLIT_ERR_INVALID_ARGUMENT};
use super::status::{POLARSPLIT_ERR_NULL, POLARSPLIT_ERR_PANIC};

/// What an exported function returns when it cannot run its body (a NULL handle, a bad argument,
/// a caught panic): the status itself, or the type's "nothing" value.
pub(crate) trait Fallback {
    fn fallback(status: PolarsplitStatus) -> Self;
}

impl Fallback for PolarsplitStatus {
    fn fallback(status: PolarsplitStatus) -> Self {
        status
    }
}

impl Fallback for () {
    fn fallback(_: PolarsplitStatus) -> Self {}
}

impl Fallback for bool {
    fn fallback(_: PolarsplitStatus) -> Self {
        false
    }
}

impl Fallback for usize {
    fn fallback(_: PolarsplitStatus) -> Self {
        0
    }
}

impl<T> Fallback for *mut T {
    fn fallback(_: PolarsplitStatus) -> Self {
        std::ptr::null_mut()
    }
}

impl<T> Fallback for *const T {
    fn fallback(_: PolarsplitStatus) -> Self {
        std::ptr::null()
    }
}

/// Inside a closure that builds a value (`create`), the macros return the error.
impl<T> Fallback for Result<T, PolarsplitStatus> {
    fn fallback(status: PolarsplitStatus) -> Self {
        Err(status)
    }
}

/// The value of a caught panic, as the function's return type.
pub(crate) fn panicked<T: Fallback>() -> T {
    T::fallback(POLARSPLIT_ERR_PANIC)
}

/// A type the host holds by pointer (a handle created by a `_new` function).
pub(crate) trait Castable {
    /// `Some(status)` when the handle may no longer be used exclusively (a poisoned session).
    fn unusable(&self) -> Option<PolarsplitStatus> {
        None
    }

    /// A panic unwound through an exclusive call on this handle.
    fn poison(&mut self) {}

    /// Runs at the start of every exclusive call (the `test-hooks` feature forces a panic here).
    fn on_use(&mut self) {}
}

/// Exclusive access to a handle for one call; poisons the handle if a panic unwinds through it.
pub(crate) struct Exclusive<'a, T: Castable>(&'a mut T);

impl<T: Castable> Deref for Exclusive<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.0
    }
}

impl<T: Castable> DerefMut for Exclusive<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        self.0
    }
}

impl<T: Castable> Drop for Exclusive<'_, T> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.poison();
        }
    }
}

/// # Safety
/// `p` must be NULL or point to a live `T`.
pub(crate) unsafe fn shared<'a, T: Castable>(p: *const T) -> Result<&'a T, PolarsplitStatus> {
    // SAFETY: NULL or a live handle (the caller's contract).
    unsafe { p.as_ref() }.ok_or(POLARSPLIT_ERR_NULL)
}

/// # Safety
/// `p` must be NULL or point to a live `T` that no other thread uses during the call.
pub(crate) unsafe fn exclusive<'a, T: Castable>(
    p: *mut T,
) -> Result<Exclusive<'a, T>, PolarsplitStatus> {
    // SAFETY: NULL or a live handle used by this thread only (the caller's contract).
    let h = unsafe { p.as_mut() }.ok_or(POLARSPLIT_ERR_NULL)?;
    if let Some(status) = h.unusable() {
        return Err(status);
    }
    let mut h = Exclusive(h);
    h.on_use();
    Ok(h)
}

/// A new handle for the host (freed by [`free`] or consumed by [`take`]).
pub(crate) fn boxed<T>(value: T) -> *mut T {
    Box::into_raw(Box::new(value))
}

/// The `_new` idiom: `*out` is set to NULL, then to a new handle when `make` succeeds; the
/// status is `make`'s. Call it inside the exported function's [`boundary!`]; `make` may use the
/// `try_*!` macros (they return its error).
///
/// # Safety
/// `out` must be NULL or a writable pointer slot.
pub(crate) unsafe fn create<T>(
    out: *mut *mut T,
    make: impl FnOnce() -> Result<T, PolarsplitStatus>,
) -> PolarsplitStatus {
    // SAFETY: as documented.
    let mut out = match unsafe { self::out(out) } {
        Ok(o) => o,
        Err(status) => return status,
    };
    out.set(std::ptr::null_mut());
    match make() {
        Ok(v) => {
            out.set(boxed(v));
            super::status::POLARSPLIT_OK
        }
        Err(status) => status,
    }
}

/// Takes a handle back from the host (a `_build` that consumes, a `_free`). NULL gives `None`.
///
/// # Safety
/// `p` must be NULL or a handle made by [`boxed`] that the host no longer uses.
pub(crate) unsafe fn take<T>(p: *mut T) -> Option<Box<T>> {
    // SAFETY: a handle made by `boxed`, returned once (the caller's contract).
    (!p.is_null()).then(|| unsafe { Box::from_raw(p) })
}

/// Frees a handle; NULL is a no-op.
///
/// # Safety
/// As [`take`].
pub(crate) unsafe fn free<T>(p: *mut T) {
    // SAFETY: as documented.
    drop(unsafe { take(p) });
}

/// A writable output slot of the host. Only written, never read: the host may leave it
/// uninitialised, so no Rust reference to its contents is ever made.
pub(crate) struct Out<'a, T>(*mut T, PhantomData<&'a mut T>);

impl<T> Out<'_, T> {
    /// Stores `value` (plain data: nothing is dropped).
    pub(crate) fn set(&mut self, value: T) {
        // SAFETY: non-NULL and writable (checked when the `Out` was made, the caller's contract).
        unsafe { self.0.write(value) }
    }
}

/// A required output slot (NULL: `POLARSPLIT_ERR_NULL`).
///
/// # Safety
/// `p` must be NULL or writable for the call.
pub(crate) unsafe fn out<'a, T>(p: *mut T) -> Result<Out<'a, T>, PolarsplitStatus> {
    if p.is_null() {
        Err(POLARSPLIT_ERR_NULL)
    } else {
        Ok(Out(p, PhantomData))
    }
}

/// An optional output slot (NULL: the host does not want the value).
///
/// # Safety
/// As [`out`].
pub(crate) unsafe fn opt_out<'a, T>(p: *mut T) -> Option<Out<'a, T>> {
    (!p.is_null()).then_some(Out(p, PhantomData))
}

/// A readable input value (copied).
///
/// # Safety
/// `p` must be NULL or point to a readable `T`.
pub(crate) unsafe fn value<T: Copy>(p: *const T) -> Result<T, PolarsplitStatus> {
    // SAFETY: NULL or readable (the caller's contract).
    unsafe { p.as_ref() }.copied().ok_or(POLARSPLIT_ERR_NULL)
}

/// `len` readable elements at `p`; NULL only with `len == 0`. A length no array can have is
/// refused before any slice is made.
///
/// # Safety
/// `p` must be NULL or point to `len` readable `T`s.
pub(crate) unsafe fn slice<'a, T>(p: *const T, len: usize) -> Result<&'a [T], PolarsplitStatus> {
    if len == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(POLARSPLIT_ERR_NULL);
    }
    if len > isize::MAX as usize / std::mem::size_of::<T>().max(1) {
        return Err(POLARSPLIT_ERR_INVALID_ARGUMENT);
    }
    // SAFETY: `len` readable elements (the caller's contract); the length fits an allocation.
    Ok(unsafe { std::slice::from_raw_parts(p, len) })
}

/// `len` writable elements at `p`; NULL only with `len == 0`.
///
/// # Safety
/// `p` must be NULL or point to `len` writable `T`s.
pub(crate) unsafe fn slice_mut<'a, T>(
    p: *mut T,
    len: usize,
) -> Result<&'a mut [T], PolarsplitStatus> {
    if len == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(POLARSPLIT_ERR_NULL);
    }
    if len > isize::MAX as usize / std::mem::size_of::<T>().max(1) {
        return Err(POLARSPLIT_ERR_INVALID_ARGUMENT);
    }
    // SAFETY: `len` writable elements (the caller's contract); the length fits an allocation.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, len) })
}

/// The bytes of a NUL-terminated string, in any encoding.
///
/// # Safety
/// `p` must be NULL or a NUL-terminated string.
pub(crate) unsafe fn cbytes<'a>(p: *const c_char) -> Result<&'a [u8], PolarsplitStatus> {
    if p.is_null() {
        return Err(POLARSPLIT_ERR_NULL);
    }
    // SAFETY: a NUL-terminated string (the caller's contract).
    Ok(unsafe { CStr::from_ptr(p) }.to_bytes())
}

/// A NUL-terminated UTF-8 string (invalid UTF-8 is `POLARSPLIT_ERR_INVALID_ARGUMENT`).
///
/// # Safety
/// As [`cbytes`].
pub(crate) unsafe fn text<'a>(p: *const c_char) -> Result<&'a str, PolarsplitStatus> {
    // SAFETY: as documented.
    let b = unsafe { cbytes(p) }?;
    std::str::from_utf8(b).map_err(|_| POLARSPLIT_ERR_INVALID_ARGUMENT)
}

/// Copies `text` into a caller buffer as a NUL-terminated string, truncating at a UTF-8
/// boundary when it does not fit. Returns the full length of `text` (without NUL), so a caller
/// can retry with a larger buffer. A NULL buffer or zero length writes nothing.
///
/// # Safety
/// `buf` must be NULL or point to `len` writable bytes.
pub(crate) unsafe fn write_text(buf: *mut c_char, len: usize, text: &str) -> usize {
    if !buf.is_null() && len > 0 {
        let mut n = text.len().min(len - 1);
        while n > 0 && !text.is_char_boundary(n) {
            n -= 1;
        }
        // SAFETY: `n + 1 <= len` bytes are writable at `buf`; the source is `text`.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), n);
            *buf.add(n) = 0;
        }
    }
    text.len()
}

/// Structs that grow at the end within an ABI version. The host passes the `sizeof` it was
/// built with; the library reads or writes only that many bytes (the growth rule of the header).
///
/// # Safety
/// Implementors must be `repr(C)` structs for which all-zero bytes are a valid value (integers,
/// `bool`s, raw pointers).
pub(crate) unsafe trait Growable: Copy {
    /// The struct's size in ABI 3.0: a host's struct is never smaller. Members appended in a
    /// later 3.x lie beyond it; an older host's size says it does not know them.
    const BASE_SIZE: usize;
}

/// Reads a growable input struct of the host's `size`: fields beyond it (appended after the host
/// was built) read as zero, their documented default. A size below the ABI 3.0 size is
/// `POLARSPLIT_ERR_ABI`.
///
/// # Safety
/// `p` must be NULL or point to `size` readable bytes.
pub(crate) unsafe fn read_sized<T: Growable>(
    p: *const T,
    size: usize,
) -> Result<T, PolarsplitStatus> {
    if p.is_null() {
        return Err(POLARSPLIT_ERR_NULL);
    }
    if size < T::BASE_SIZE {
        return Err(POLARSPLIT_ERR_ABI);
    }
    // SAFETY: all-zero is a valid `T` (the `Growable` contract).
    let mut v: T = unsafe { std::mem::zeroed() };
    let n = size.min(std::mem::size_of::<T>());
    // SAFETY: `n <= size` readable bytes at `p`, `n <= size_of::<T>()` writable at `v`.
    unsafe { std::ptr::copy_nonoverlapping(p.cast::<u8>(), (&raw mut v).cast::<u8>(), n) };
    Ok(v)
}

/// Writes a growable output struct into the host's `size` bytes: the library's fields that fit,
/// and zeros for any bytes of a newer host beyond them. Never a byte past `size`. A size below
/// the ABI 3.0 size is `POLARSPLIT_ERR_ABI` (nothing is written).
///
/// # Safety
/// `p` must be NULL or point to `size` writable bytes.
pub(crate) unsafe fn write_sized<T: Growable>(
    p: *mut T,
    size: usize,
    value: &T,
) -> Result<(), PolarsplitStatus> {
    if p.is_null() {
        return Err(POLARSPLIT_ERR_NULL);
    }
    if size < T::BASE_SIZE {
        return Err(POLARSPLIT_ERR_ABI);
    }
    let own = std::mem::size_of::<T>();
    let n = size.min(own);
    // SAFETY: `size` writable bytes at `p` (the caller's contract); `n <= size`, and the zeroed
    // tail `own..size` lies within `size` too.
    unsafe {
        std::ptr::copy_nonoverlapping((value as *const T).cast::<u8>(), p.cast::<u8>(), n);
        if size > own {
            std::ptr::write_bytes(p.cast::<u8>().add(own), 0, size - own);
        }
    }
    Ok(())
}

/// Runs the body of an exported function inside a panic boundary: a panic becomes the
/// function's [`Fallback`] of `POLARSPLIT_ERR_PANIC`. `return` inside the body returns from the
/// function.
macro_rules! boundary {
    ($($body:tt)*) => {
        match ::std::panic::catch_unwind(::std::panic::AssertUnwindSafe(|| { $($body)* })) {
            Ok(v) => v,
            Err(_) => $crate::ffi::handle::panicked(),
        }
    };
}

/// The `Ok` value of an argument check, or return its status as the function's [`Fallback`].
macro_rules! try_arg {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(status) => return $crate::ffi::handle::Fallback::fallback(status),
        }
    };
}

/// Shared access to a handle argument (NULL: `POLARSPLIT_ERR_NULL`).
macro_rules! try_ref {
    ($p:expr) => {
        // SAFETY: a handle argument of the exported function (see the module docs).
        $crate::ffi::handle::try_arg!(unsafe { $crate::ffi::handle::shared($p) })
    };
}

/// Exclusive access to a handle argument: NULL is `POLARSPLIT_ERR_NULL`, an unusable handle
/// its own status (`POLARSPLIT_ERR_POISONED`); a panic in the rest of the call poisons it.
macro_rules! try_mut {
    ($p:expr) => {
        // SAFETY: a handle argument of the exported function (see the module docs).
        $crate::ffi::handle::try_arg!(unsafe { $crate::ffi::handle::exclusive($p) })
    };
}

/// A required output argument (NULL: `POLARSPLIT_ERR_NULL`).
macro_rules! try_out {
    ($p:expr) => {
        // SAFETY: an output argument of the exported function (see the module docs).
        $crate::ffi::handle::try_arg!(unsafe { $crate::ffi::handle::out($p) })
    };
}

pub(crate) use {boundary, try_arg, try_mut, try_out, try_ref};

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C)]
    #[derive(Clone, Copy, Debug, PartialEq)]
    struct Grown {
        a: u64,
        b: u32,
        c: u32,
    }

    // SAFETY: repr(C) integers.
    unsafe impl Growable for Grown {
        const BASE_SIZE: usize = 8;
    }

    #[test]
    fn growth_rule_reads_a_smaller_host_struct_with_zero_defaults() {
        let host = [7u64, 0xffff_ffff_ffff_ffff];
        // A host built when only `a` existed: 8 bytes; the rest must not be read.
        let v = unsafe { read_sized(host.as_ptr().cast::<Grown>(), 8) }.unwrap();
        assert_eq!(v, Grown { a: 7, b: 0, c: 0 });
        let v = unsafe { read_sized(host.as_ptr().cast::<Grown>(), 12) }.unwrap();
        assert_eq!((v.b, v.c), (u32::MAX, 0));
        assert_eq!(
            unsafe { read_sized(host.as_ptr().cast::<Grown>(), 7) },
            Err(POLARSPLIT_ERR_ABI)
        );
    }

    #[test]
    fn growth_rule_never_writes_past_the_host_size_and_zeroes_a_newer_hosts_tail() {
        let value = Grown { a: 1, b: 2, c: 3 };
        let mut host = [0xAAu8; 24];
        unsafe { write_sized(host.as_mut_ptr().cast::<Grown>(), 12, &value) }.unwrap();
        assert_eq!(&host[..8], &1u64.to_ne_bytes());
        assert_eq!(&host[8..12], &2u32.to_ne_bytes());
        assert!(host[12..].iter().all(|b| *b == 0xAA), "{host:?}");
        let mut host = [0xAAu8; 24];
        unsafe { write_sized(host.as_mut_ptr().cast::<Grown>(), 24, &value) }.unwrap();
        assert!(host[16..].iter().all(|b| *b == 0), "{host:?}");
        let mut host = [0xAAu8; 24];
        assert_eq!(
            unsafe { write_sized(host.as_mut_ptr().cast::<Grown>(), 4, &value) },
            Err(POLARSPLIT_ERR_ABI)
        );
        assert!(host.iter().all(|b| *b == 0xAA));
    }
}
