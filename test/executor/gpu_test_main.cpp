// The main of the executor's GPU test programs. Test cases of the suite "gpu" need a CUDA device, those of "gpus:4"
// four (a pipeline on NCCL, one GPU per rank). Where the devices are missing those cases are filtered out, so that
// doctest counts them as skipped, and a run in which every selected case was filtered so exits with 77, which ctest
// reports as skipped (SKIP_RETURN_CODE). ctest runs each program twice: the cases that need no GPU
// (--test-suite-exclude=gpu,gpus:4) and the GPU cases (--test-suite=gpu,gpus:4, the test named *_gpu).
#define DOCTEST_CONFIG_IMPLEMENT
#include <cuda_runtime_api.h>
#include <doctest/doctest.h>

#include <iostream>

namespace {

// How many test cases passed the filters, read when the run ends.
unsigned selected_cases = 0;

struct SelectionCounter : doctest::IReporter {
  explicit SelectionCounter(const doctest::ContextOptions& /*options*/) {}
  void report_query(const doctest::QueryData& /*data*/) override {}
  void test_run_start() override {}
  void test_run_end(const doctest::TestRunStats& stats) override { selected_cases = stats.numTestCasesPassingFilters; }
  void test_case_start(const doctest::TestCaseData& /*data*/) override {}
  void test_case_reenter(const doctest::TestCaseData& /*data*/) override {}
  void test_case_end(const doctest::CurrentTestCaseStats& /*stats*/) override {}
  void test_case_exception(const doctest::TestCaseException& /*exception*/) override {}
  void subcase_start(const doctest::SubcaseSignature& /*signature*/) override {}
  void subcase_end() override {}
  void log_assert(const doctest::AssertData& /*data*/) override {}
  void log_message(const doctest::MessageData& /*data*/) override {}
  void test_case_skipped(const doctest::TestCaseData& /*data*/) override {}
};
REGISTER_LISTENER("selection_counter", 1, SelectionCounter);

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess) devices = 0;
  doctest::Context context(argc, argv);
  if (devices < 1) context.addFilter("test-suite-exclude", "gpu");
  if (devices < 4) context.addFilter("test-suite-exclude", "gpus:4");
  const int result = context.run();
  if (context.shouldExit() || result != 0) return result;
  if (selected_cases == 0 && devices < 4) {
    std::cout << "skipped: these test cases need CUDA devices; found " << devices << "\n";
    return 77;
  }
  return 0;
}
