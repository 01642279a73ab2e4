// The sluice command-line tool's dispatch: every command, compiled once for the tool and the tests.
#include "cli.hpp"

#include <exception>
#include <ostream>
#include <span>
#include <string_view>

#include "inspect.hpp"
#include "plan.hpp"
#include "propose.hpp"
#include "schedule.hpp"
#include "search.hpp"
#include "shard.hpp"
#include "simulate.hpp"
#include "sluice/core/error.hpp"
#include "trace.hpp"

namespace sluice::cli {

namespace {

constexpr std::string_view usage =
    "usage: sluice <command> [options]\n"
    "\n"
    "commands:\n"
    "  inspect   dataset statistics and histogram; per scheme MaxLen, UtilLen and T(l)\n"
    "  plan      plan K iterations over candidate strategies: dispatch, packing, choice\n"
    "  propose   propose the candidate strategies worth considering for a dataset and a profile\n"
    "  schedule  DynaPipe in one pipeline: micro-batch DP, replica balancing, adaptive schedule, instructions\n"
    "  search    hybrid-parallel strategy and pipeline partition search for a model on a cluster\n"
    "  shard     pull/push LNK plans between the optimizer layout and a strategy, and their cost\n"
    "  simulate  Megatron-LM, HotSPa, DynaPipe and sluice on the same batches: simulated time, speedups\n"
    "  trace     one planned iteration's pipeline timelines as SVG and Chrome-trace JSON\n"
    "\n"
    "`sluice <command> --help` describes a command's options.\n";

}  // namespace

int run(std::span<const std::string_view> args, std::ostream& out, std::ostream& err, std::ostream* terminal) {
  try {
    if (args.empty()) {
      err << usage;
      return 2;
    }
    const std::string_view command = args.front();
    const auto rest = args.subspan(1);
    if (command == "--help" || command == "-h" || command == "help") {
      out << usage;
      return 0;
    }
    if (command == "inspect") return inspect(rest, out);
    if (command == "plan") return plan(rest, out, terminal);
    if (command == "propose") return propose(rest, out);
    if (command == "schedule") return schedule_command(rest, out);
    if (command == "search") return search_command(rest, out);
    if (command == "shard") return shard(rest, out);
    if (command == "simulate") return simulate(rest, out, terminal);
    if (command == "trace") return trace(rest, out);
    detail::fail("unknown command '", command, "' (try sluice --help)");
  } catch (const invalid_input& error) {
    err << "sluice: error: " << error.what() << "\n";
    return 2;
  } catch (const infeasible& error) {
    // The input asks for what no plan can do (a sequence no scheme holds, a budget nothing fits).
    err << "sluice: error: " << error.what() << "\n";
    return 2;
  } catch (const std::exception& error) {
    err << "sluice: internal error: " << error.what() << "\n";
    return 1;
  }
}

}  // namespace sluice::cli
