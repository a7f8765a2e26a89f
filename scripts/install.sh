#!/usr/bin/env bash
# Installs libpolarsplit the way C projects expect a system library (issue 21), doing what
# cargo-c's `cargo cinstall` would without building cargo-c:
#
#   $LIBDIR/libpolarsplit.so.<ABI>.<VERSION>   the shared library (SONAME libpolarsplit.so.<ABI>)
#   $LIBDIR/libpolarsplit.so.<ABI>             -> the above (what the loader looks for)
#   $LIBDIR/libpolarsplit.so                   -> libpolarsplit.so.<ABI> (what -lpolarsplit finds)
#   $LIBDIR/libpolarsplit.a                    the static library
#   $INCLUDEDIR/polarsplit.h                   the generated header
#   $LIBDIR/pkgconfig/polarsplit.pc            for `pkg-config --cflags --libs polarsplit`
#
# <ABI> is `abi-version` of [package.metadata.polarsplit] in Cargo.toml (read, never assumed);
# the script refuses a built library whose SONAME disagrees with it or with the header.
#
# Usage: scripts/install.sh [--no-build]     (environment: PREFIX, LIBDIR, INCLUDEDIR, DESTDIR)
#   PREFIX      default /usr/local
#   LIBDIR      default $PREFIX/lib
#   INCLUDEDIR  default $PREFIX/include
#   DESTDIR     staging root prepended to every path written (packagers); the .pc keeps the
#               unstaged paths
#   CARGO_TARGET_DIR is honoured. Run `ldconfig` yourself after a system-wide install (the
#   script runs it only when installing into / as root with no DESTDIR).
set -euo pipefail
cd "$(dirname "$0")/.."

build=1
for arg in "$@"; do
    case "$arg" in
        --no-build) build=0 ;;
        -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
        *) echo "install.sh: unknown argument $arg" >&2; exit 2 ;;
    esac
done

PREFIX="${PREFIX:-/usr/local}"
LIBDIR="${LIBDIR:-$PREFIX/lib}"
INCLUDEDIR="${INCLUDEDIR:-$PREFIX/include}"
DESTDIR="${DESTDIR:-}"
TARGET_DIR="${CARGO_TARGET_DIR:-target}"
REL="$TARGET_DIR/release"

# [package] version and [package.metadata.polarsplit] abi-version, from Cargo.toml itself.
toml_value() { # section key
    awk -v want="[$1]" -v key="$2" '
        /^\[/ { sect = $0; next }
        sect == want && $1 == key { sub(/^[^=]*=[ \t]*/, ""); gsub(/"/, ""); sub(/[ \t]*#.*/, ""); print; exit }
    ' Cargo.toml
}
VERSION="$(toml_value package version)"
ABI="$(toml_value package.metadata.polarsplit abi-version)"
if ! [[ "$ABI" =~ ^[0-9]+$ ]] || [ -z "$VERSION" ]; then
    echo "install.sh: cannot read version ($VERSION) / abi-version ($ABI) from Cargo.toml" >&2
    exit 1
fi
HEADER_ABI="$(sed -n 's/^#define POLARSPLIT_ABI_VERSION //p' include/polarsplit.h)"
if [ "$HEADER_ABI" != "$ABI" ]; then
    echo "install.sh: include/polarsplit.h says ABI $HEADER_ABI, Cargo.toml says $ABI" >&2
    exit 1
fi

if [ "$build" = 1 ]; then
    cargo build --release --quiet
fi
for f in "$REL/libpolarsplit.so" "$REL/libpolarsplit.a"; do
    [ -f "$f" ] || { echo "install.sh: $f missing (cargo build --release)" >&2; exit 1; }
done

SONAME="libpolarsplit.so.$ABI"
built_soname="$(objdump -p "$REL/libpolarsplit.so" | awk '$1 == "SONAME" { print $2 }')"
if [ "$built_soname" != "$SONAME" ]; then
    echo "install.sh: $REL/libpolarsplit.so has SONAME '$built_soname', expected $SONAME (stale build?)" >&2
    exit 1
fi
REAL="$SONAME.$VERSION"

# The system libraries the Rust static library needs (what `--print native-static-libs` lists
# for this crate on Linux/glibc); only used by `pkg-config --static`.
LIBS_PRIVATE="-lgcc_s -lutil -lrt -lpthread -lm -ldl -lc"

install -d "$DESTDIR$LIBDIR" "$DESTDIR$INCLUDEDIR" "$DESTDIR$LIBDIR/pkgconfig"
install -m 0755 "$REL/libpolarsplit.so" "$DESTDIR$LIBDIR/$REAL"
ln -sfn "$REAL" "$DESTDIR$LIBDIR/$SONAME"
ln -sfn "$SONAME" "$DESTDIR$LIBDIR/libpolarsplit.so"
install -m 0644 "$REL/libpolarsplit.a" "$DESTDIR$LIBDIR/libpolarsplit.a"
install -m 0644 include/polarsplit.h "$DESTDIR$INCLUDEDIR/polarsplit.h"
sed -e "s|@PREFIX@|$PREFIX|g" -e "s|@LIBDIR@|$LIBDIR|g" -e "s|@INCLUDEDIR@|$INCLUDEDIR|g" \
    -e "s|@VERSION@|$VERSION|g" -e "s|@ABI@|$ABI|g" -e "s|@LIBS_PRIVATE@|$LIBS_PRIVATE|g" \
    scripts/polarsplit.pc.in > "$DESTDIR$LIBDIR/pkgconfig/polarsplit.pc"
chmod 0644 "$DESTDIR$LIBDIR/pkgconfig/polarsplit.pc"

if [ -z "$DESTDIR" ] && [ "$(id -u)" -eq 0 ] && command -v ldconfig >/dev/null 2>&1; then
    case "$LIBDIR" in
        /usr/lib|/usr/local/lib|/lib|/usr/lib/*-linux-gnu) ldconfig ;;
    esac
fi
echo "installed libpolarsplit $VERSION (ABI $ABI) into $DESTDIR$PREFIX: $LIBDIR/$SONAME, $INCLUDEDIR/polarsplit.h, $LIBDIR/pkgconfig/polarsplit.pc"
