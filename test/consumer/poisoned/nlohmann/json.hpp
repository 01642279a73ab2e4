#error "a planner header included <nlohmann/json.hpp>"
