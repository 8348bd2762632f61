#!/usr/bin/env bash
# The rule of tests/support/requires.hpp for shell tests: a missing tool never passes. Under
# CI=true it fails the test (exit 1); elsewhere the test prints "SKIPPED: <why>" and exits 77,
# which ctest reports as skipped (the test is registered with SKIP_RETURN_CODE 77).
# Sourced, not run:  source "$(dirname "${BASH_SOURCE[0]}")/../support/requires.sh"

# missing_tool WHY: ends the test for want of a tool, as the rule says.
missing_tool() {
  if [[ "${CI:-}" == "true" || "${CI:-}" == "1" ]]; then
    echo "FAIL: $1; under CI=true every tool must be installed"
    exit 1
  fi
  echo "SKIPPED: $1"
  exit 77
}

# require_tool NAME HOW: returns when NAME is on PATH; otherwise missing_tool, saying HOW to get it.
require_tool() {
  command -v "$1" >/dev/null 2>&1 || missing_tool "$1 not found ($2)"
}
