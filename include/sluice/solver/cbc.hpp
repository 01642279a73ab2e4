#pragma once
// Solves a solver::Model with CBC (COIN-OR). Include this only from code that links sluice::cbc.
#ifndef SLUICE_HAVE_CBC
#error "sluice/solver/cbc.hpp needs CBC: link the sluice::cbc target (defined when pkg-config finds cbc)"
#endif

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <limits>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

// CBC's headers are not written for -Wconversion -Wshadow and friends; keep them out of our warning set.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wall"
#pragma GCC diagnostic ignored "-Wextra"
#pragma GCC diagnostic ignored "-Wpedantic"
#pragma GCC diagnostic ignored "-Wshadow"
#pragma GCC diagnostic ignored "-Wconversion"
#pragma GCC diagnostic ignored "-Wsign-conversion"
#pragma GCC diagnostic ignored "-Wdeprecated-copy"
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include <CbcModel.hpp>
#include <CbcSolver.hpp>
#include <CoinError.hpp>
#include <CoinPackedMatrix.hpp>
#include <OsiClpSolverInterface.hpp>
#pragma GCC diagnostic pop

#include "sluice/core/error.hpp"
#include "sluice/core/span.hpp"
#include "sluice/solver/milp.hpp"

namespace sluice::solver {

struct CbcOptions {
  double time_limit_seconds = 10.0;  // wall clock for the whole call; > 0, or infinity for none
  int threads = 1;                   // 1..99; more than one runs CBC's deterministic parallel search
  bool log = false;                  // CBC's own log on stdout
  // One value per variable, feasible for the model (checked). The result is never worse than it.
  std::optional<std::vector<double>> warm_start = std::nullopt;
  double relative_gap = 0.0;  // stop once (incumbent - bound) / |incumbent| <= this
};

}  // namespace sluice::solver

namespace sluice::detail {

// CBC's command processor keeps its parsing state in globals (CbcOrClpRead_mode and others),
// so two solves must never run at once; every CBC search in the process takes this lock.
inline std::mutex& cbc_mutex() {
  static std::mutex mutex;
  return mutex;
}

// Locale-independent: CBC parses the numbers we hand it as command arguments.
inline std::string cbc_number(double value) {
  char text[64];
  return std::string(text, std::to_chars(text, text + sizeof text, value).ptr);
}

inline double cbc_bound(double value, double solver_infinity) {
  if (value == solver::infinity) return solver_infinity;
  if (value == -solver::infinity) return -solver_infinity;
  return value;
}

// Integer variables rounded to the nearest integer, after checking that they are within 1e-6 of it.
inline std::vector<double> cbc_integral(const solver::Model& model, Span<const double> values) {
  std::vector<double> result(values.begin(), values.end());
  for (std::size_t j = 0; j < result.size(); ++j) {
    if (model.types()[j] == solver::VarType::continuous) continue;
    const double rounded = std::round(result[j]);
    if (std::abs(result[j] - rounded) > 1e-6) {
      throw std::runtime_error(
          concat("cbc: integer variable ", j, " has value ", result[j], ", not within 1e-6 of an integer"));
    }
    result[j] = rounded + 0.0;  // + 0.0 turns -0.0 into 0.0
  }
  return result;
}

// The model as CBC's LP solver holds it. The objective offset stays out of CBC and is added to what it reports.
inline OsiClpSolverInterface cbc_problem(const solver::Model& model) {
  require(model.num_nonzeros() <= static_cast<std::size_t>(std::numeric_limits<CoinBigIndex>::max()),
          "cbc: too many nonzeros for CBC: ", model.num_nonzeros());
  const int n = model.num_variables();
  const int rows = model.num_constraints();
  std::vector<CoinBigIndex> starts(model.row_starts().begin(), model.row_starts().end());
  std::vector<int> lengths(static_cast<std::size_t>(rows));
  for (int r = 0; r < rows; ++r) lengths[r] = static_cast<int>(starts[r + 1] - starts[r]);
  const CoinPackedMatrix matrix(false, n, rows, starts.back(), model.row_coefs().data(), model.row_vars().data(),
                                starts.data(), lengths.data());

  OsiClpSolverInterface lp;
  const double inf = lp.getInfinity();
  std::vector<double> col_lower(static_cast<std::size_t>(n));
  std::vector<double> col_upper(static_cast<std::size_t>(n));
  for (int j = 0; j < n; ++j) {
    col_lower[j] = cbc_bound(model.lower_bounds()[j], inf);
    col_upper[j] = cbc_bound(model.upper_bounds()[j], inf);
  }
  std::vector<double> row_lower(static_cast<std::size_t>(rows));
  std::vector<double> row_upper(static_cast<std::size_t>(rows));
  for (int r = 0; r < rows; ++r) {
    row_lower[r] = cbc_bound(model.row_lower_bounds()[r], inf);
    row_upper[r] = cbc_bound(model.row_upper_bounds()[r], inf);
  }
  lp.loadProblem(matrix, col_lower.data(), col_upper.data(), model.objective_coefficients().data(), row_lower.data(),
                 row_upper.data());
  lp.setObjSense(model.sense() == solver::Sense::maximize ? -1.0 : 1.0);
  for (int j = 0; j < n; ++j) {
    if (model.types()[j] != solver::VarType::continuous) lp.setInteger(j);
  }
  return lp;
}

struct CbcSearch {
  solver::SolveStatus status = solver::SolveStatus::no_solution;
  std::vector<double> values;   // CBC's best solution as it reports it; empty without one
  std::optional<double> bound;  // CBC's best possible objective, in the model's sense, without the offset
};

// One run of CBC's driver on `lp` with `seconds` left (infinity for no limit).
inline CbcSearch cbc_search(const OsiClpSolverInterface& lp, const solver::CbcOptions& options, double seconds,
                            bool preprocess, const std::vector<std::pair<std::string, double>>& mip_start) {
  std::vector<std::string> arguments = {"sluice", "-log", options.log ? "1" : "0", "-slog", options.log ? "1" : "0"};
  if (std::isfinite(seconds)) {
    // Elapsed rather than CPU time, so the limit means the same with several threads.
    arguments.insert(arguments.end(), {"-timeMode", "elapsed", "-seconds", cbc_number(seconds)});
  }
  arguments.insert(arguments.end(), {"-ratioGap", cbc_number(options.relative_gap)});
  // CBC reads threads = 100 + k as k threads with a repeatable search; plain k would be opportunistic.
  if (options.threads > 1) arguments.insert(arguments.end(), {"-threads", std::to_string(100 + options.threads)});
  if (!preprocess) arguments.insert(arguments.end(), {"-preprocess", "off"});
  arguments.insert(arguments.end(), {"-solve", "-quit"});
  std::vector<const char*> argv;
  argv.reserve(arguments.size());
  for (const std::string& argument : arguments) argv.push_back(argument.c_str());

  const std::lock_guard lock(cbc_mutex());
  CbcModel cbc(lp);
  CbcSolverUsefulData data;
  data.noPrinting_ = !options.log;  // also silences the banner and the final summary
  data.useSignalHandler_ = false;   // a library must not take over SIGINT
  CbcMain0(cbc, data);
  if (!options.log) {
    cbc.messageHandler()->setLogLevel(0);
    cbc.solver()->messageHandler()->setLogLevel(0);
  }
  if (!mip_start.empty()) cbc.setMIPStart(mip_start);
  try {
    CbcMain1(
        static_cast<int>(argv.size()), argv.data(), cbc, [](CbcModel*, int) { return 0; }, data);
  } catch (const CoinError& error) {
    throw std::runtime_error("cbc: " + error.className() + "::" + error.methodName() + ": " + error.message());
  }

  CbcSearch search;
  const double* best = cbc.bestSolution();
  if (cbc.isProvenInfeasible()) {
    search.status = solver::SolveStatus::infeasible;
    return search;
  }
  if (cbc.isContinuousUnbounded() || cbc.secondaryStatus() == 7) {
    search.status = solver::SolveStatus::unbounded;
    return search;
  }
  // CBC says "no bound" with a huge finite value (1e50 or DBL_MAX).
  if (const double bound = cbc.getBestPossibleObjValue(); std::abs(bound) < 1e40) search.bound = bound;
  if (best == nullptr) {
    search.status = solver::SolveStatus::no_solution;
  } else {
    const bool proven = cbc.status() == 0 && cbc.isProvenOptimal();
    search.status = proven ? solver::SolveStatus::optimal : solver::SolveStatus::feasible;
    if (cbc.getNumCols() != lp.getNumCols()) {
      throw std::runtime_error(concat("cbc: solution has ", cbc.getNumCols(), " columns, the model ", lp.getNumCols()));
    }
    search.values.assign(best, best + cbc.getNumCols());
  }
  return search;
}

}  // namespace sluice::detail

namespace sluice::solver {

// Solves `model` with CBC's standard driver (CbcMain0/CbcMain1 of the C++ API), the same search the
// `cbc` program and PuLP run: preprocessing, cut generators and heuristics on top of CbcModel. A bare
// CbcModel::branchAndBound has none of these and is far weaker on the min-max assignment models
// planners build. The C++ API rather than Cbc_C_Interface (which wraps the same driver) lets us switch
// the driver's printing and signal handling off directly and read CbcModel's status and bound.
// Deterministic when it ends by proof rather than by the time limit: one thread searches sequentially,
// several run CBC's deterministic parallel mode.
inline Solution solve_with_cbc(const Model& model, const CbcOptions& options = {}) {
  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&start] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  const int n = model.num_variables();
  sluice::require(n > 0, "cbc: the model is empty (no variables)");
  sluice::require(options.time_limit_seconds > 0.0, "cbc: time_limit_seconds must be > 0 (or infinity), got ",
                  options.time_limit_seconds);
  sluice::require(options.threads >= 1 && options.threads <= 99, "cbc: threads must be in [1, 99], got ",
                  options.threads);
  sluice::require(std::isfinite(options.relative_gap) && options.relative_gap >= 0.0,
                  "cbc: relative_gap must be finite and >= 0, got ", options.relative_gap);
  if (options.warm_start) {
    const std::vector<double>& warm = *options.warm_start;
    sluice::require(warm.size() == static_cast<std::size_t>(n), "cbc: warm_start has ", warm.size(),
                    " values but the model has ", n, " variables");
    sluice::require(model.is_feasible(warm, 1e-6), "cbc: warm_start is not a feasible point of the model");
  }

  OsiClpSolverInterface lp = detail::cbc_problem(model);
  if (!options.log) lp.messageHandler()->setLogLevel(0);
  // CBC takes a MIP start by column name; our own names ("c<index>") cannot collide.
  std::vector<std::pair<std::string, double>> mip_start;
  if (options.warm_start) {
    mip_start.reserve(static_cast<std::size_t>(n));
    for (int j = 0; j < n; ++j) {
      std::string name = "c";
      name += std::to_string(j);  // not "c" + ...: GCC 12 raises a false -Wrestrict on that (bug 105329)
      lp.setColName(j, name);
      mip_start.emplace_back(std::move(name), (*options.warm_start)[j]);
    }
  }

  // CBC 2.10 dereferences null in CglPreProcess::postProcess when the time limit expires on a model given a
  // MIP start (test_packing reproduces it), so a warm-started search runs without preprocessing. On the 200
  // packing instances of test_packing this moves CBC's result by at most 0.07% either way.
  const bool preprocess = mip_start.empty();
  detail::CbcSearch search = detail::cbc_search(lp, options, options.time_limit_seconds, preprocess, mip_start);
  if (search.status == SolveStatus::infeasible && preprocess) {
    // CBC's preprocessing can claim infeasibility wrongly, reliably so when the time limit cuts it short
    // (and in reported bugs); only a search without it, in the time left, is trusted to prove it.
    const double left = options.time_limit_seconds - elapsed();
    search = left > 0.0 ? detail::cbc_search(lp, options, left, false, mip_start) : detail::CbcSearch{};
  }

  Solution solution;
  solution.status = search.status;
  const double worst = model.sense() == Sense::minimize ? infinity : -infinity;
  if (!search.values.empty()) {
    solution.values = detail::cbc_integral(model, search.values);
    solution.objective = model.evaluate_objective(solution.values);
  } else {
    solution.objective = search.status == SolveStatus::unbounded ? -worst : worst;
  }
  if (search.status == SolveStatus::infeasible) {
    solution.best_bound = worst;
  } else {
    solution.best_bound = search.bound ? *search.bound + model.objective_offset() : -worst;
    if (search.status == SolveStatus::optimal) {
      // When the incumbent (a MIP start, say) cuts off the root LP, CBC proves optimality but reports the
      // root relaxation, or nothing, as its bound; its proof says the optimum is within the gap asked for.
      const double proven = options.relative_gap * std::abs(solution.objective);
      solution.best_bound = model.sense() == Sense::minimize
                                ? std::max(solution.best_bound, solution.objective - proven)
                                : std::min(solution.best_bound, solution.objective + proven);
    }
  }
  // A time limit can end the search before CBC looks at the MIP start; the caller still gets at least the
  // (checked) warm start back.
  if (options.warm_start && (solution.status == SolveStatus::no_solution || solution.status == SolveStatus::feasible)) {
    std::vector<double> warm = detail::cbc_integral(model, *options.warm_start);
    const double objective = model.evaluate_objective(warm);
    const bool better =
        model.sense() == Sense::minimize ? objective < solution.objective : objective > solution.objective;
    if (solution.status == SolveStatus::no_solution || better) {
      solution.status = SolveStatus::feasible;
      solution.values = std::move(warm);
      solution.objective = objective;
    }
  }
  solution.seconds = elapsed();
  return solution;
}

}  // namespace sluice::solver
