# Sourced by the scripts that keep a test tool in a virtual environment of its own, outside the clone
# (embedding_server.sh, fastembed_env.sh), so that a fresh clone (CI) finds it installed; setup.sh uses its marker
# and stamp for .venv too.
#
# A finished install leaves the file .posfair-installed in the environment, holding a stamp of what it was made from;
# a run that finds another stamp installs anew. An install that fails (no network, a version gone) is reported with
# the tail of its log, its folder removed, and the caller goes on: the tests that need it skip with the reason.

# side_venv_current VENV STAMP: whether VENV holds a finished install made from STAMP (never for a stamp that could
# not be computed: "unknown" would match every later change)
side_venv_current() {
    [ "$2" != unknown ] && [ -f "$1/.posfair-installed" ] && [ -x "$1/bin/python" ] \
        && [ "$(cat "$1/.posfair-installed")" = "$2" ]
}

# side_venv_base VENV: a new environment with pip and torch 2.13.0. torch goes in first, from the local CPU wheel:
# left to resolve plain `torch`, pip would pull a CUDA build of several GB
side_venv_base() {
    rm -rf "$1"
    mkdir -p "$(dirname "$1")"
    "${PYTHON:-python3}" -m venv "$1"
    "$1/bin/python" -m pip install --quiet --upgrade pip
    "$1/bin/python" -m pip install --quiet torch==2.13.0
}

# side_venv_install LABEL VENV STAMP STEPS: run the function STEPS (which fills VENV) with `set -e` in force and its
# output in a log; on success write STAMP as the marker, else show the log's tail, remove VENV and say SKIPPED
side_venv_install() {
    local label="$1" venv="$2" stamp="$3" steps="$4" log status
    log="$(mktemp)"
    # a subshell of its own with set -e in force (in an `if` condition bash would run on past a failed step)
    set +e
    (set -e; "$steps") > "$log" 2>&1
    status=$?
    set -e
    if [ "$status" -eq 0 ]; then
        echo "$stamp" > "$venv/.posfair-installed"
        echo "$label: installed"
    else
        grep -v "is ignored" "$log" | tail -5 >&2 || true
        rm -rf "$venv"
        echo "$label SKIPPED: it could not be installed (above); its tests will skip"
    fi
    rm -f "$log"
}

# side_venv_stamp FILE...: a short hash of pyproject's runtime dependencies and the given files
side_venv_stamp() {
    "${PYTHON:-python3}" -c 'import hashlib, sys, tomllib
deps = tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]
parts = ["\n".join(deps), *(open(name).read() for name in sys.argv[1:])]
print(hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16])' "$@" || echo unknown
}
