# deps.sh: make sure the build dependencies are here (sourced by scripts/demo
# and scripts/check). As root, installs what is missing from Debian's
# packages; otherwise prints the exact install line and stops.

CUMEMCAP_DEBS="meson ninja-build pkg-config check gcc python3 binutils"

cumemcap_missing_debs() {
	local missing=""
	command -v meson >/dev/null 2>&1 || missing="$missing meson"
	command -v ninja >/dev/null 2>&1 || missing="$missing ninja-build"
	command -v pkg-config >/dev/null 2>&1 || missing="$missing pkg-config"
	command -v cc >/dev/null 2>&1 || missing="$missing gcc"
	command -v python3 >/dev/null 2>&1 || missing="$missing python3"
	command -v nm >/dev/null 2>&1 || missing="$missing binutils"
	if ! pkg-config --exists check 2>/dev/null; then missing="$missing check"; fi
	echo "$missing"
}

cumemcap_ensure_deps() {
	local missing
	missing=$(cumemcap_missing_debs)
	if [ -n "$missing" ]; then
		if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
			echo "cumemcap: installing build dependencies:$missing" >&2
			DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null
			# shellcheck disable=SC2086
			DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing >/dev/null
		else
			echo "cumemcap: missing build dependencies. Install them with:" >&2
			echo "    sudo apt-get install -y$missing" >&2
			exit 1
		fi
	fi
	local inc="${CUDA_INCLUDE:-/usr/local/cuda/include}"
	if [ ! -f "$inc/cuda.h" ] || [ ! -f "$inc/cudaTypedefs.h" ]; then
		echo "cumemcap: the CUDA Toolkit headers are not in $inc (cuda.h, cudaTypedefs.h)." >&2
		echo "    Install the CUDA Toolkit, or set CUDA_INCLUDE=/path/to/cuda/include" >&2
		exit 1
	fi
}

# cumemcap_setup BUILD_DIR [meson options...]: configure once, then build.
cumemcap_setup() {
	local dir="$1"
	shift
	local inc="${CUDA_INCLUDE:-/usr/local/cuda/include}"
	if [ ! -f "$dir/build.ninja" ]; then
		meson setup "$dir" -Dcuda-include="$inc" "$@" >"$dir.setup.log" 2>&1 || {
			cat "$dir.setup.log" >&2
			exit 1
		}
	fi
	meson compile -C "$dir" >"$dir.compile.log" 2>&1 || {
		cat "$dir.compile.log" >&2
		exit 1
	}
}
