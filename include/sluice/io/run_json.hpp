#pragma once
// JSON for the reports of the CLI's commands, so that a program reads what `sluice <command> --json` prints: one
// header per report, all included here: "sluice.schedule_run" (schedule_run_json.hpp), "sluice.shard_run"
// (shard_run_json.hpp), "sluice.simulate_run" (simulate_run_json.hpp) and "sluice.trace_run" (trace_run_json.hpp).
#include "sluice/io/schedule_run_json.hpp"
#include "sluice/io/shard_run_json.hpp"
#include "sluice/io/simulate_run_json.hpp"
#include "sluice/io/trace_run_json.hpp"
