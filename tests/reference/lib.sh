# Sourced by the scripts of tests/reference after tests/fault/lib.sh: the Python with transformers and torch
# checked, the models transformers makes (tests/reference/hf_models.py) in $work/hf, and kiln import's deck
# lines as --set options. Expects $kiln, $work and $python.
# Found, not imported: importing both costs 5-6 CPU-s, and the models' script below imports them anyway.
"$python" -c "import importlib.util as u, sys; sys.exit(not all(u.find_spec(m) for m in ('transformers', 'torch')))" ||
  fail "no Python with transformers and torch at $python: ./bootstrap.sh test (or ./bootstrap.sh reference) installs them"
here=$(dirname "${BASH_SOURCE[0]}")
"$python" "$here/hf_models.py" "$work/hf" >"$work/models.log" 2>&1 || { cat "$work/models.log"; fail "transformers could not make the models"; }

# The deck lines kiln import prints, as --set options.
model_settings() { "$kiln" import "$1" | awk -F' = ' '/^[a-z_]+ = / { printf "--set model.%s=%s ", $1, $2 }'; }
