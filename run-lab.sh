#!/usr/bin/env bash
# run-lab.sh: build the reference as static executables into bin/ and run the
# numbered lab steps against them. Options pass through to `lab run`:
#   ./run-lab.sh            all eight steps
#   ./run-lab.sh 8          one step, by number or name: ./run-lab.sh crash
#   ./run-lab.sh 3-5        a range (./run-lab.sh claim-redrive);  ./run-lab.sh 1,4  a list
#   ./run-lab.sh -v 8       with the step's story (every command, line and check)
#   ./run-lab.sh --bin DIR  against another implementation's queuectl, sender, receiver
#   ./run-lab.sh --results results.json --junit junit.xml --html report.html --keep
set -euo pipefail
cd "$(dirname "$0")"
CGO_ENABLED=0 go build -o bin/ ./cmd/...
exec bin/lab run --bin bin "$@"
