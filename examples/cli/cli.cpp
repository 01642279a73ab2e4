// The sluice command-line tool's dispatch: every command, compiled once for the tool and the tests.
#include "cli.hpp"

#include <exception>
#include <ostream>
#include <span>
#include <string>
#include <string_view>

#include "../common/version.hpp"
#include "fit.hpp"
#include "inspect.hpp"
#include "outputs.hpp"
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
    "  fit       measured samples of one's own model and cluster -> a sluice profile, with each fit's error\n"
    "  inspect   dataset statistics and histogram; per scheme MaxLen, UtilLen and T(l)\n"
    "  plan      plan K iterations over candidate strategies: dispatch, packing, choice\n"
    "  propose   propose the candidate strategies worth considering for a dataset and a profile\n"
    "  schedule  DynaPipe in one pipeline: micro-batch DP, replica balancing, adaptive schedule, instructions\n"
    "  search    hybrid-parallel strategy and pipeline partition search for a model on a cluster\n"
    "  shard     pull/push LNK plans between the optimizer layout and a strategy, and their cost\n"
    "  simulate  Megatron-LM, HotSPa, DynaPipe and sluice on the same batches: simulated time, speedups\n"
    "  trace     one planned iteration's pipeline timelines as SVG and Chrome-trace JSON\n"
    "\n"
    "`sluice <command> --help` describes a command's options; `sluice --version` prints the version.\n";

// One line however the message was made: control characters (a newline or ESC inside a file name, a JSON
// string or an option) are written as escapes, so that nothing from the input reaches the terminal raw.
std::string printable(std::string_view message) {
  std::string result;
  for (const char c : message) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '\n') {
      result += "\\n";
    } else if (c == '\t') {
      result += "\\t";
    } else if (byte < 0x20 || byte == 0x7f) {
      constexpr std::string_view digits = "0123456789abcdef";
      result += {'\\', 'x', digits[byte >> 4], digits[byte & 0xf]};
    } else {
      result += c;
    }
  }
  return result;
}

int dispatch(std::string_view command, std::span<const std::string_view> rest, std::ostream& out, Outputs& outputs,
             std::ostream* terminal) {
  if (command == "--help" || command == "-h" || command == "help") {
    out << usage;
    return 0;
  }
  if (command == "--version") {
    out << sluice::command_line::version << "\n";
    return 0;
  }
  if (command == "fit") return fit_command(rest, out, outputs);
  if (command == "inspect") return inspect(rest, out, outputs);
  if (command == "plan") return plan(rest, out, outputs, terminal);
  if (command == "propose") return propose(rest, out);
  if (command == "schedule") return schedule_command(rest, out, outputs);
  if (command == "search") return search_command(rest, out, terminal);
  if (command == "shard") return shard(rest, out);
  if (command == "simulate") return simulate(rest, out, outputs, terminal);
  if (command == "trace") return trace(rest, out, outputs);
  sluice::fail("unknown command '", command, "' (try sluice --help)");
}

}  // namespace

int run(std::span<const std::string_view> args, std::ostream& out, std::ostream& err, std::ostream* terminal) {
  try {
    // Declared inside the try: on any failure its destructor removes what the command staged or created.
    Outputs outputs;
    sluice::require(!args.empty(), "no command given (try sluice --help)");
    const int code = dispatch(args.front(), args.subspan(1), out, outputs, terminal);
    // Output that could not be written (a full disk, a closed pipe) is a failure, not a silent success.
    out.flush();
    if (!out) {
      err << "sluice: error: cannot write standard output\n";
      return 1;
    }
    outputs.commit();
    return code;
  } catch (const invalid_input& error) {
    err << "sluice: error: " << printable(error.what()) << "\n";
    return 2;
  } catch (const infeasible& error) {
    // The input asks for what no plan can do (a sequence no scheme holds, a budget nothing fits).
    err << "sluice: error: " << printable(error.what()) << "\n";
    return 2;
  } catch (const write_error& error) {
    err << "sluice: error: " << printable(error.what()) << "\n";
    return 1;
  } catch (const std::exception& error) {
    err << "sluice: internal error: " << printable(error.what()) << "\n";
    return 1;
  }
}

}  // namespace sluice::cli
