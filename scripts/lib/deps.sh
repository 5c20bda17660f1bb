# deps.sh: the Debian packages cumemcap's scripts use, in one place (sourced
# by scripts/demo, scripts/check and scripts/fresh-check). As root, installs
# what is missing; otherwise prints the one apt-get line and stops.

# What building the library, its tools and the fake driver takes: the demo
# needs nothing more (Check: the fake driver's build sits beside its tests;
# libjson-c-dev: cumemcap report reads the logs with json-c).
CUMEMCAP_DEBS_BUILD="gcc libc6-dev binutils meson ninja-build pkg-config check python3 libjson-c-dev"

# What the whole suite takes on top of that:
#   clang and its sanitizer and libFuzzer runtimes: the clang build and the fuzzers;
#   ffmpeg, GStreamer, hashcat: the real programs tests/integration/test_programs.py runs;
#   prometheus: promtool checks the metrics file;
#   python3-yaml: the Kubernetes manifests;
#   libcairo2-dev: the report's PNG and PDF (cumemcap report --plot);
#   poppler-utils: pdftoppm renders the report's PDF for its check;
#   bash-completion, man-db, groff-base: the installed completion and man pages;
#   build-essential, dpkg-dev, debhelper, fakeroot, git: the Debian package's
#     build (dpkg-buildpackage checks for build-essential) from a clean checkout;
#   util-linux, passwd: the tests that run as two users (unshare, setpriv, useradd);
#   libslurm-dev, slurmctld, slurmd, slurm-client, munge: the SPANK plugin's
#     header (slurm/spank.h) and the single-node Slurm tests/integration/test_slurm.py
#     starts (daemons of its own, never the packages' services).
CUMEMCAP_DEBS_SUITE="clang libclang-rt-14-dev
	ffmpeg gstreamer1.0-tools gstreamer1.0-plugins-base gstreamer1.0-plugins-bad hashcat
	prometheus python3-yaml libcairo2-dev poppler-utils
	bash-completion man-db groff-base build-essential dpkg-dev debhelper fakeroot git util-linux passwd
	libslurm-dev slurmctld slurmd slurm-client munge"

# The packages of the list(s) given that are not installed.
cumemcap_missing_debs() {
	local pkg missing=""
	# shellcheck disable=SC2068
	for pkg in $@; do
		if [ "$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null)" != installed ]; then
			missing="$missing $pkg"
		fi
	done
	echo "$missing"
}

# cumemcap_ensure_debs PACKAGES...: install what is missing (root), or print
# the line that would and stop.
cumemcap_ensure_debs() {
	local missing
	if ! command -v dpkg-query >/dev/null 2>&1; then
		echo "cumemcap: this is not a Debian system; install the equivalents of: $*" >&2
		exit 1
	fi
	missing=$(cumemcap_missing_debs "$@")
	[ -n "$missing" ] || return 0
	if [ "$(id -u)" = 0 ]; then
		echo "cumemcap: installing from Debian's packages:$missing" >&2
		local log
		log=$(mktemp)
		# shellcheck disable=SC2086
		if ! { DEBIAN_FRONTEND=noninteractive apt-get update -q &&
		       DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing; } >"$log" 2>&1; then
			tail -n 30 "$log" >&2
			rm -f "$log"
			echo "cumemcap: apt-get could not install:$missing" >&2
			exit 1
		fi
		rm -f "$log"
	else
		echo "cumemcap: missing packages. Install them with:" >&2
		echo "    sudo apt-get install -y --no-install-recommends$missing" >&2
		exit 1
	fi
}

cumemcap_check_cuda_headers() {
	local inc="${CUDA_INCLUDE:-/usr/local/cuda/include}"
	if [ ! -f "$inc/cuda.h" ] || [ ! -f "$inc/cudaTypedefs.h" ]; then
		echo "cumemcap: the CUDA Toolkit headers are not in $inc (cuda.h, cudaTypedefs.h)." >&2
		echo "    Install the CUDA Toolkit, or set CUDA_INCLUDE=/path/to/cuda/include" >&2
		exit 1
	fi
}

# What scripts/demo needs.
cumemcap_ensure_deps() {
	# shellcheck disable=SC2086
	cumemcap_ensure_debs $CUMEMCAP_DEBS_BUILD
	cumemcap_check_cuda_headers
}

# What scripts/check needs: the build and every program the suite runs, so
# that nothing in it is skipped for a missing package.
cumemcap_ensure_suite_deps() {
	# shellcheck disable=SC2086
	cumemcap_ensure_debs $CUMEMCAP_DEBS_BUILD $CUMEMCAP_DEBS_SUITE
	cumemcap_check_cuda_headers
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
