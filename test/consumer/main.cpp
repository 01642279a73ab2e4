// Uses sluice through its umbrella header (sluice::all) and reads a bundled profile, proving the data dir is found.
#include <iostream>

#include <sluice/sluice.hpp>

int main() {
  const auto path = sluice::io::resolve_data_file(sluice::io::default_profile, "profiles");
  const auto profile = sluice::io::read_document<sluice::cost::Profile>(path);
  std::cout << path.string() << "\n";
  const auto strategy = sluice::Strategy({{sluice::Scheme(4, 2), 2}});
  const auto pipelines = profile.pipelines(strategy);
  std::cout << profile.name() << " " << strategy.name() << " MaxLen " << pipelines.front().max_len << "\n";
  return pipelines.size() == 2 && pipelines.front().max_len > 0 ? 0 : 1;
}
