#pragma once
// JSON for the core vocabulary types.
#include <cstdint>
#include <vector>

#include "sluice/core/scheme.hpp"
#include "sluice/core/sequence.hpp"
#include "sluice/core/strategy.hpp"
#include "sluice/io/json.hpp"

namespace sluice::io {
SLUICE_IO_DOCUMENT(Strategy, "sluice.strategy", 1);
}  // namespace sluice::io

namespace nlohmann {

template <>
struct adl_serializer<sluice::Scheme> {
  // CP and AC are written only where a scheme has them ("cp_kind" and "recompute" mark such a scheme; see
  // io::to_document), so a ⟨TP, PP⟩ scheme reads as it always has.
  static void to_json(json& out, const sluice::Scheme& scheme) {
    out = {{"tp", scheme.tp()}, {"pp", scheme.pp()}};
    if (scheme.cp() > 1) {
      out["cp"] = scheme.cp();
      out["cp_kind"] = sluice::name_in(sluice::cp_kind_names, scheme.cp_kind());
      if (scheme.cp_kind() == sluice::CpKind::hybrid) out["ulysses"] = scheme.ulysses();
    }
    if (scheme.recompute() == sluice::Recompute::full) out["recompute"] = "full";
  }
  static sluice::Scheme from_json(const json& in) {
    using sluice::io::field_or;
    // Degrees absent from the document default to 1, so older documents stay readable as degrees are added.
    sluice::Degrees degrees{.tp = field_or<int>(in, "tp", 1, "scheme"),
                            .pp = field_or<int>(in, "pp", 1, "scheme"),
                            .cp = field_or<int>(in, "cp", 1, "scheme")};
    if (in.contains("cp_kind"))
      degrees.cp_kind =
          sluice::value_in(sluice::cp_kind_names, field_or<std::string>(in, "cp_kind", "", "scheme"), "scheme.cp_kind");
    degrees.ulysses = field_or<int>(in, "ulysses", 0, "scheme");
    if (in.contains("recompute"))
      degrees.recompute = sluice::value_in(sluice::recompute_names,
                                           field_or<std::string>(in, "recompute", "", "scheme"), "scheme.recompute");
    return sluice::Scheme(degrees);
  }
};

template <>
struct adl_serializer<sluice::StrategyPart> {
  static void to_json(json& out, const sluice::StrategyPart& part) {
    out = json(part.scheme);
    out["pipelines"] = part.pipelines;
  }
  static sluice::StrategyPart from_json(const json& in) {
    return {in.get<sluice::Scheme>(), sluice::io::field<int>(in, "pipelines", "strategy part")};
  }
};

template <>
struct adl_serializer<sluice::Strategy> {
  static void to_json(json& out, const sluice::Strategy& strategy) { out = {{"parts", strategy.parts()}}; }
  static sluice::Strategy from_json(const json& in) {
    return sluice::Strategy(sluice::io::field<std::vector<sluice::StrategyPart>>(in, "parts", "strategy"));
  }
};

template <>
struct adl_serializer<sluice::Pipeline> {
  static void to_json(json& out, const sluice::Pipeline& pipeline) {
    out = json(pipeline.scheme);
    out["index"] = pipeline.index;
    out["max_len"] = pipeline.max_len;
  }
  static sluice::Pipeline from_json(const json& in) {
    return {sluice::io::field<int>(in, "index", "pipeline"), in.get<sluice::Scheme>(),
            sluice::io::field<std::int64_t>(in, "max_len", "pipeline")};
  }
};

template <>
struct adl_serializer<sluice::Sequence> {
  static void to_json(json& out, const sluice::Sequence& sequence) {
    out = {{"id", sequence.id()}, {"length", sequence.length()}};
  }
  static sluice::Sequence from_json(const json& in) {
    return {sluice::io::field<std::int64_t>(in, "id", "sequence"),
            sluice::io::field<std::int64_t>(in, "length", "sequence")};
  }
};

}  // namespace nlohmann
