# Sourced by scripts/test.sh and scripts/bench.sh: libCacheSim's Python bindings (PyPI), the
# peer of the oracleGeneral interop test and of `bench cache`, installed into target/peers/venv
# when no python3 here imports them; CORDILLERA_LIBCACHESIM_PYTHON names the Python that has
# them. $1: what goes without them, said if the install fails.
if python3 -c 'import libcachesim' >/dev/null 2>&1; then
  export CORDILLERA_LIBCACHESIM_PYTHON=python3
else
  venv=target/peers/venv
  if ! "$venv/bin/python" -c 'import libcachesim' >/dev/null 2>&1; then
    echo "installing libcachesim==0.3.5 (PyPI) into $venv"
    python3 -m venv "$venv" && "$venv/bin/pip" install -q libcachesim==0.3.5 \
      || echo "libcachesim not installed: $1"
  fi
  export CORDILLERA_LIBCACHESIM_PYTHON="$PWD/$venv/bin/python"
fi
