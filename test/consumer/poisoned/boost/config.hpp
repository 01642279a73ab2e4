#error "a planner header included Boost"
