"""``rungar doctor``: what stands between this machine and a working daemon, one line each."""
