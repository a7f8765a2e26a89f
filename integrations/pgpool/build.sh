#!/usr/bin/env bash
# Builds Pgpool-II 4.3.5 (Debian 12's pgpool2 source) with polarsplit's patch, linked to an
# installed libpolarsplit found by pkg-config (issue 21).
#
#   1. a bookworm deb-src entry is added to /etc/apt/sources.list.d/ when apt knows no pgpool2
#      source (same URIs and suites as the deb entry);
#   2. `apt-get source --download-only pgpool2` into $PGPOOL_CACHE/src (kept; never committed),
#      unpacked with dpkg-source (Debian's own patches applied);
#   3. libpolarsplit is installed into $PGPOOL_CACHE/prefix with scripts/install.sh;
#   4. for each variant whose binary is stale, our files (integrations/pgpool/src/) are copied
#      into a fresh tree and pgpool2-4.3.5-polarsplit.patch is applied; then ONE `make -j2`
#      configures and builds every stale variant (`./configure --with-polarsplit`, and with
#      --plain `./configure` alone), with PKG_CONFIG_PATH on that prefix and an rpath to its
#      libdir.
#
# The result is $PGPOOL_CACHE/bin/pgpool. A variant is skipped when none of its inputs changed
# (the patch, our sources, this script, and for --with-polarsplit the installed header): the
# library itself is linked dynamically, so a rebuilt libpolarsplit.so needs only the install of
# step 3. In a fresh clone (CI) both variants are built once per run.
#
# Usage: integrations/pgpool/build.sh [--no-library-build] [--plain]
#   PGPOOL_CACHE   default <repo>/target/pgpool
#   --no-library-build: install the already built target/release library (no cargo build)
#   --plain: also build the patched tree without --with-polarsplit ($PGPOOL_CACHE/bin/pgpool-plain)
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../.." && pwd)"
CACHE="${PGPOOL_CACHE:-$ROOT/target/pgpool}"
VERSION=4.3.5
PATCH="$HERE/pgpool2-$VERSION-polarsplit.patch"
PREFIX="$CACHE/prefix"

library_build=1
plain=0
for arg in "$@"; do
    case "$arg" in
        --no-library-build) library_build=0 ;;
        --plain) plain=1 ;;
        *) echo "build.sh: unknown argument $arg" >&2; exit 2 ;;
    esac
done

step() { printf '=== pgpool: %s\n' "$*"; }
need_root() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "build.sh: $1 needs root (or do it yourself)" >&2
        exit 1
    fi
}

# --- 1. a deb-src entry --------------------------------------------------------------------
# shellcheck source=../../scripts/lib/setup.sh
source "$ROOT/scripts/lib/setup.sh"
ensure_deb_src pgpool2 "$VERSION"

# --- tools: bison and flex for Pgpool's parser, libpq-dev, dpkg-source --------------------------
need=()
command -v bison >/dev/null 2>&1 || need+=(bison)
command -v flex >/dev/null 2>&1 || need+=(flex)
[ -f /usr/include/postgresql/libpq-fe.h ] || need+=(libpq-dev)
command -v dpkg-source >/dev/null 2>&1 || need+=(dpkg-dev)
command -v patch >/dev/null 2>&1 || need+=(patch)
command -v make >/dev/null 2>&1 || need+=(make)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
if ((${#need[@]})); then
    need_root "installing ${need[*]}"
    step "installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need[@]}" >/dev/null
fi

# --- 2. the source ------------------------------------------------------------------------
mkdir -p "$CACHE/src"
dsc="$(ls "$CACHE"/src/pgpool2_"$VERSION"-*.dsc 2>/dev/null | head -n1 || true)"
if [ -z "$dsc" ]; then
    step "apt-get source pgpool2 ($VERSION)"
    (cd "$CACHE/src" && apt-get source --download-only -qq pgpool2 2>&1 | grep -v "unsandboxed" || true)
    dsc="$(ls "$CACHE"/src/pgpool2_"$VERSION"-*.dsc 2>/dev/null | head -n1 || true)"
    [ -n "$dsc" ] || { echo "build.sh: apt-get source gave no pgpool2 $VERSION" >&2; exit 1; }
fi
pristine="$CACHE/src/pgpool2-$VERSION"
if [ ! -f "$pristine/configure" ]; then
    rm -rf "$pristine"
    (cd "$CACHE/src" && dpkg-source -q -x "$(basename "$dsc")" "pgpool2-$VERSION" >/dev/null)
fi

# --- 3. libpolarsplit, installed ------------------------------------------------------------
if [ "$library_build" = 1 ]; then
    (cd "$ROOT" && cargo build --release --quiet)
fi
PREFIX="$PREFIX" bash "$ROOT/scripts/install.sh" --no-build >/dev/null
export PKG_CONFIG_PATH="$PREFIX/lib/pkgconfig"
pkg-config --exists polarsplit

# --- 4. patch and build (cached) -----------------------------------------------------------
# stamp_of_inputs NAME FLAGS...: what a variant's binary depends on. The build without the switch
# never includes the library's header (every use of it is under USE_POLARSPLIT), so a new header
# rebuilds only the variant that uses it.
stamp_of_inputs() {
    {
        echo "$*"
        cat "$PATCH" "$HERE/build.sh"
        case " $* " in *" --with-polarsplit "*) cat "$PREFIX/include/polarsplit.h" ;; esac
        find "$HERE/src" -type f | sort | xargs cat
        basename "$dsc"
    } | sha256sum | cut -d' ' -f1
}

# prepare_variant NAME FLAGS...: when $CACHE/bin/NAME is stale, a fresh patched tree in
# $CACHE/build-NAME and a rule in the makefile below that configures it with FLAGS and builds it.
stale=()
rules=""
prepare_variant() {
    local name="$1" stamp build
    shift
    stamp="$(stamp_of_inputs "$name" "$@")"
    if [ -x "$CACHE/bin/$name" ] && [ "$(cat "$CACHE/bin/.$name.stamp" 2>/dev/null)" = "$stamp" ]; then
        step "$name up to date"
        return
    fi
    build="$CACHE/build-$name"
    step "$name: patching $build (configure $*)"
    rm -rf "$build" "$CACHE/bin/$name" "$CACHE/bin/.$name.stamp"
    cp -a "$pristine" "$build"
    cp -a "$HERE/src/." "$build/src/"
    (cd "$build" && patch -p1 -s < "$PATCH")
    stale+=("$name")
    rules+="$name.done:
\tcd build-$name && ./configure -q $* LDFLAGS=-Wl,-rpath,$PREFIX/lib >\$(CURDIR)/configure-$name.log 2>&1 || { tail -30 \$(CURDIR)/configure-$name.log >&2; exit 1; }
\t+\$(MAKE) -s -C build-$name >make-$name.log 2>&1 || { grep -E 'error|Error' make-$name.log | head -40 >&2; exit 1; }
\tmkdir -p bin && cp build-$name/src/pgpool bin/$name && echo $stamp > bin/.$name.stamp
"
}

prepare_variant pgpool --with-polarsplit
# The same patched tree without the switch: Pgpool as it was (issue 21: unchanged when off).
[ "$plain" = 1 ] && prepare_variant pgpool-plain

# One make -j2 for every stale variant: its jobserver keeps both cores busy across the two trees
# (one variant's configure, which is serial, runs beside the other's compile).
if ((${#stale[@]})); then
    step "building ${stale[*]} (one make -j2)"
    printf '.PHONY: all %s\nall: %s\n%b' "${stale[*]/%/.done}" "${stale[*]/%/.done}" "$rules" > "$CACHE/variants.mk"
    make -s -j2 -C "$CACHE" -f variants.mk
fi
for name in pgpool $([ "$plain" = 1 ] && echo pgpool-plain); do
    [ -x "$CACHE/bin/$name" ] || { echo "build.sh: $CACHE/bin/$name was not built" >&2; exit 1; }
done
grep -q "#define USE_POLARSPLIT 1" "$CACHE/build-pgpool/src/include/config.h"
step "built $CACHE/bin/pgpool (needs: $(objdump -p "$CACHE/bin/pgpool" | awk '$1 == "NEEDED" { printf "%s ", $2 }'))"
if [ "$plain" = 1 ]; then
    ! grep -q "#define USE_POLARSPLIT 1" "$CACHE/build-pgpool-plain/src/include/config.h"
fi
