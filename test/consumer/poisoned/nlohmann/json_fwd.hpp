#error "a planner header included <nlohmann/json_fwd.hpp>"
