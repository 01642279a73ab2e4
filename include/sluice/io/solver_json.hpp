#pragma once
// JSON for MILP models and solutions ("sluice.milp" and "sluice.milp_solution", version 1), so that a
// planner's model can be saved, inspected and solved again elsewhere. Infinite bounds are extended numbers
// (io::detail::extended_number): the strings "inf" and "-inf".
#include <array>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "sluice/io/json.hpp"
#include "sluice/io/record.hpp"
#include "sluice/solver/milp.hpp"

namespace sluice::io {
SLUICE_IO_DOCUMENT(solver::Model, "sluice.milp", 1);
SLUICE_IO_DOCUMENT(solver::Solution, "sluice.milp_solution", 1);

SLUICE_IO_RECORD(solver::Solution, "milp solution", SLUICE_IO_MEMBERS(status),
                 extended_member("objective", &T::objective), extended_member("best_bound", &T::best_bound),
                 SLUICE_IO_MEMBERS(values, seconds));

}  // namespace sluice::io

namespace nlohmann {

template <>
struct adl_serializer<sluice::solver::Sense> {
  static void to_json(json& out, sluice::solver::Sense sense) {
    out = sense == sluice::solver::Sense::minimize ? "minimize" : "maximize";
  }
  static sluice::solver::Sense from_json(const json& in) {
    if (in == "minimize") return sluice::solver::Sense::minimize;
    if (in == "maximize") return sluice::solver::Sense::maximize;
    sluice::fail("milp: sense must be \"minimize\" or \"maximize\", got ", sluice::io::detail::describe(in));
  }
};

template <>
struct adl_serializer<sluice::solver::VarType> {
  static void to_json(json& out, sluice::solver::VarType type) {
    using enum sluice::solver::VarType;
    out = type == continuous ? "continuous" : type == integer ? "integer" : "binary";
  }
  static sluice::solver::VarType from_json(const json& in) {
    using enum sluice::solver::VarType;
    if (in == "continuous") return continuous;
    if (in == "integer") return integer;
    if (in == "binary") return binary;
    sluice::fail("milp: unknown variable type ", sluice::io::detail::describe(in));
  }
};

template <>
struct adl_serializer<sluice::solver::SolveStatus> {
  static constexpr std::string_view names[] = {"optimal", "feasible", "infeasible", "unbounded", "no_solution"};
  static void to_json(json& out, sluice::solver::SolveStatus status) { out = names[static_cast<std::size_t>(status)]; }
  static sluice::solver::SolveStatus from_json(const json& in) {
    for (std::size_t i = 0; i < std::size(names); ++i)
      if (in == names[i]) return static_cast<sluice::solver::SolveStatus>(i);
    sluice::fail("milp solution: unknown status ", sluice::io::detail::describe(in));
  }
};

template <>
struct adl_serializer<sluice::solver::Model> {
  static void to_json(json& out, const sluice::solver::Model& model) {
    using sluice::io::detail::extended_number;
    json variables = json::array();
    for (int var = 0; var < model.num_variables(); ++var) {
      const auto v = static_cast<std::size_t>(var);
      variables.push_back({{"name", model.variable_name(var)},
                           {"type", model.types()[v]},
                           {"lower", extended_number(model.lower_bounds()[v])},
                           {"upper", extended_number(model.upper_bounds()[v])},
                           {"objective", model.objective_coefficients()[v]}});
    }
    json constraints = json::array();
    for (int r = 0; r < model.num_constraints(); ++r) {
      const sluice::solver::RowView row = model.row(r);
      json terms = json::array();
      for (std::size_t k = 0; k < row.vars.size(); ++k) terms.push_back({row.vars[k], row.coefs[k]});
      constraints.push_back({{"name", model.constraint_name(r)},
                             {"lower", extended_number(row.lower)},
                             {"upper", extended_number(row.upper)},
                             {"terms", std::move(terms)}});
    }
    out = {{"sense", model.sense()},
           {"objective_offset", model.objective_offset()},
           {"variables", std::move(variables)},
           {"constraints", std::move(constraints)}};
  }
  static sluice::solver::Model from_json(const json& in) {
    using sluice::io::field;
    using sluice::io::field_or;
    using sluice::io::detail::extended_field;
    sluice::solver::Model model;
    model.set_sense(field_or<sluice::solver::Sense>(in, "sense", sluice::solver::Sense::minimize, "milp"));
    model.set_objective_offset(field_or<double>(in, "objective_offset", 0.0, "milp"));
    for (const json& variable : field<std::vector<json>>(in, "variables", "milp"))
      model.add_variable(extended_field(variable, "lower", "milp variable"),
                         extended_field(variable, "upper", "milp variable"),
                         field<sluice::solver::VarType>(variable, "type", "milp variable"),
                         field<double>(variable, "objective", "milp variable"),
                         field_or<std::string>(variable, "name", "", "milp variable"));
    for (const json& constraint : field<std::vector<json>>(in, "constraints", "milp")) {
      std::vector<int> vars;
      std::vector<double> coefs;
      for (const json& term : field<std::vector<json>>(constraint, "terms", "milp constraint")) {
        const auto pair =
            sluice::io::as<std::array<json, 2>>(term, "milp constraint: term [variable index, coefficient]");
        vars.push_back(sluice::io::as<int>(pair[0], "milp constraint: term variable index"));
        coefs.push_back(sluice::io::as<double>(pair[1], "milp constraint: term coefficient"));
      }
      model.add_constraint(vars, coefs, extended_field(constraint, "lower", "milp constraint"),
                           extended_field(constraint, "upper", "milp constraint"),
                           field_or<std::string>(constraint, "name", "", "milp constraint"));
    }
    return model;
  }
};

}  // namespace nlohmann
