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

# side_venv_base VENV: a new environment with torch 2.13.0 and `venv_install` pointed at it. torch goes in first, from
# the local CPU wheel: left to resolve plain `torch`, the installer would pull a CUDA build of several GB. Its
# bytecode is not compiled whole: the suite starts one process in each side environment, which compiles only what it
# imports (side_venv_warm writes that much at install)
side_venv_base() {
    rm -rf "$1"
    mkdir -p "$(dirname "$1")"
    "${PYTHON:-python3}" -m venv "$1"
    venv_installer "$1" lazy
    venv_install torch==2.13.0
}

# venv_installer VENV [lazy]: make `venv_install ARGS...` install into VENV, through uv where pip can fetch it (about half of
# pip's time, which CI pays on every run on a fresh machine), else through pip. uv reads none of pip's configuration,
# so the indexes, wheel folders, constraints and certificate that pip is given here are handed to it.
#   - every index is searched for the best match, as pip does (uv's default stops at the first index with the name);
#   - files are copied, not hardlinked from uv's cache: nltk (under LlamaIndex's sentence splitter) refuses to open
#     a file with more than one link;
#   - bytecode is compiled now, as pip does, unless `lazy` is given: where PYTHONDONTWRITEBYTECODE is set (it is on
#     the CI machine), every interpreter, Ray worker and test child would otherwise compile torch again
venv_installer() {
    local url place file cert
    VENV_PYTHON="$1/bin/python"
    VENV_UV_ARGS=()
    VENV_PIP_ARGS=(--quiet)
    if [ "${2:-}" = lazy ]; then
        VENV_PIP_ARGS+=(--no-compile)
    fi
    if ! { "$VENV_PYTHON" -m pip install --quiet uv > /dev/null 2>&1 && "$VENV_PYTHON" -m uv --version > /dev/null 2>&1; }; then
        echo "uv could not be installed into $1; installing with pip (slower)"
        "$VENV_PYTHON" -m pip install --quiet --upgrade pip 2>&1 | pip_quiet
        return
    fi
    PIP_CONFIG="$("$VENV_PYTHON" -m pip config list 2> /dev/null || true)"
    VENV_UV_ARGS=(--quiet --python "$VENV_PYTHON" --index-strategy unsafe-best-match --link-mode copy)
    if [ "${2:-}" != lazy ]; then
        VENV_UV_ARGS+=(--compile-bytecode)
    fi
    for url in $(pip_setting index-url); do VENV_UV_ARGS+=(--default-index "$url"); done
    for url in $(pip_setting extra-index-url); do VENV_UV_ARGS+=(--index "$url"); done
    for place in $(pip_setting find-links); do VENV_UV_ARGS+=(--find-links "$place"); done
    for file in $(pip_setting constraint); do VENV_UV_ARGS+=(--constraint "$file"); done
    cert="$(pip_setting cert | head -n 1)"
    if [ -n "$cert" ]; then
        export SSL_CERT_FILE="$cert"
    fi
}

# venv_install ARGS...: `pip install ARGS...` into the environment of the last venv_installer call
venv_install() {
    if [ "${#VENV_UV_ARGS[@]}" -gt 0 ]; then
        "$VENV_PYTHON" -m uv pip install "${VENV_UV_ARGS[@]}" "$@"
    else
        "$VENV_PYTHON" -m pip install "${VENV_PIP_ARGS[@]}" "$@" 2>&1 | pip_quiet
    fi
}

# side_venv_warm VENV CODE: run CODE in VENV's python, writing the bytecode of what it imports (whatever
# PYTHONDONTWRITEBYTECODE says), so that the suite's process there starts as from a compiled install
side_venv_warm() {
    PYTHONDONTWRITEBYTECODE= "$1/bin/python" -c "$2"
}

# pip_setting KEY: one of pip's settings as pip would read it: its environment variable first, then its config files
# (as venv_installer listed them)
pip_setting() {
    local key="$1" env_var
    env_var="PIP_$(printf '%s' "$key" | tr 'a-z-' 'A-Z_')"
    if [ -n "${!env_var:-}" ]; then
        printf '%s\n' "${!env_var}"
        return
    fi
    printf '%s\n' "$PIP_CONFIG" | sed -n -e "s/^global\.$key='\(.*\)'\$/\1/p" -e "s/^install\.$key='\(.*\)'\$/\1/p"
}

# pip_quiet: pip's output without its notes about missing local index folders, and without its warning that
# huggingface-hub 2 no longer has the 'inference' extra that llama-index-embeddings-huggingface still names (nothing a
# user can act on: the package works without it); pipefail still reports a failed install
pip_quiet() { grep -v -e "is ignored" -e "does not provide the extra 'inference'" || true; }

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
