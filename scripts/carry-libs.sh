# Sourced by the GPU scripts: stitch links libmicrohttpd (stitch serve) and hiredis (stitch worker,
# stitch queue), and the queue's GPU run needs redis-server, none of which the lent GPU machine
# has. Their Debian packages, extracted on the development machine into .carry/libs (apt-get
# download libmicrohttpd12 libhiredis0.14 redis-server redis-tools liblzf1 libjemalloc2; dpkg -x
# each .deb .carry/libs) and carried along, are put on the paths where needed.
carry_libs=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.carry/libs/usr/lib/x86_64-linux-gnu
if [ -d "$carry_libs" ] && ! { ldconfig -p | grep -q libmicrohttpd.so.12 && ldconfig -p | grep -q libhiredis.so.0.14; }; then
	export LD_LIBRARY_PATH="$carry_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
if [ -x "$carry_libs/../../bin/redis-server" ] && ! command -v redis-server >/dev/null; then
	PATH="$(cd "$carry_libs/../../bin" && pwd):$PATH"
	export PATH LD_LIBRARY_PATH="$carry_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
unset carry_libs
