# Sourced by the docker compose end-to-end tests (scripts/e2e-compose*.sh).
#
# compose_env NAME checks what they need: a docker CLI and engine, compose (the plugin or
# docker-compose v1), curl and python3, and sets COMPOSE to the compose command. Without
# docker or compose it prints "skipped: ..." and exits 0, except under CI=true, where
# the test cannot be skipped and that is a failure ("NAME: 0 passed, 1 failed").

compose_skip_or_fail() {
	if [ "${CI:-}" = true ]; then
		echo "FAIL: $2 (CI=true: the $1 test cannot be skipped)"
		echo "$1: 0 passed, 1 failed"
		exit 1
	fi
	echo "skipped: $2"
	exit 0
}

compose_env() {
	local name=$1 tool
	command -v docker >/dev/null 2>&1 || compose_skip_or_fail "$name" "no docker (docker CLI not found)"
	docker info >/dev/null 2>&1 || compose_skip_or_fail "$name" "no docker (engine not reachable)"
	if docker compose version >/dev/null 2>&1; then
		COMPOSE=(docker compose)
	elif command -v docker-compose >/dev/null 2>&1; then
		COMPOSE=(docker-compose)
	else
		compose_skip_or_fail "$name" "no docker compose (neither the plugin nor docker-compose)"
	fi
	for tool in curl python3; do
		command -v "$tool" >/dev/null 2>&1 || { echo "FAIL: $tool is required"; exit 1; }
	done
}

# port_in_use PORT: something listens on 127.0.0.1:PORT.
port_in_use() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
