# Sourced by scripts/dev and scripts/test: make .venv exist with Python >= 3.12 and
# requirements.txt installed, then leave its interpreter in $PYTHON.
# Django 6 needs Python 3.12 or newer.

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"

is_new_enough() {
  "$@" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 12) else 1)' >/dev/null 2>&1
}

find_python() {
  local candidate version
  for candidate in python3.13 python3.12 python3; do
    if command -v "$candidate" >/dev/null 2>&1 && is_new_enough "$candidate"; then
      command -v "$candidate"
      return 0
    fi
  done
  # pyenv shims answer "command not found" for versions that are installed but not
  # selected, so ask pyenv for its installed versions directly, newest first.
  if command -v pyenv >/dev/null 2>&1; then
    for version in $(pyenv versions --bare 2>/dev/null | grep -E '^3\.[0-9]+\.[0-9]+$' | sort -r -V); do
      candidate="$(pyenv root)/versions/$version/bin/python3"
      if [ -x "$candidate" ] && is_new_enough "$candidate"; then
        echo "$candidate"
        return 0
      fi
    done
  fi
  return 1
}

if [ ! -x .venv/bin/python ]; then
  if ! base_python=$(find_python); then
    echo "error: Deuz needs Python 3.12 or newer (Django 6), and none was found." >&2
    echo "Looked for python3.13, python3.12, python3 and pyenv's installed versions." >&2
    echo "Install Python 3.12+ (e.g. 'pyenv install 3.12') and run this script again." >&2
    exit 1
  fi
  echo "Creating .venv with $base_python ($("$base_python" --version 2>&1))"
  "$base_python" -m venv .venv
fi

if ! is_new_enough .venv/bin/python; then
  echo "error: .venv uses $(.venv/bin/python --version 2>&1); Deuz needs 3.12 or newer." >&2
  echo "Remove .venv and run this script again to recreate it." >&2
  exit 1
fi

stamp=.venv/.requirements.sha256
wanted=$(sha256sum requirements.txt | cut -d ' ' -f 1)
if [ "$(cat "$stamp" 2>/dev/null || true)" != "$wanted" ]; then
  echo "Installing requirements.txt into .venv"
  .venv/bin/python -m pip install --quiet --disable-pip-version-check -r requirements.txt
  echo "$wanted" > "$stamp"
fi

PYTHON="$repo_root/.venv/bin/python"
