// plan.h — the public interface of libplan.so, a small "FFT-plan-like" library: a plan owns a
// device workspace sized for the problem.
#pragma once
#include <cstddef>

struct Plan;

Plan *plan_create(size_t n);         // allocates the plan and its device workspace
int plan_execute(Plan *plan);        // runs one step; returns 0 on success
void plan_destroy(Plan *plan);       // frees the plan (and, by contract, its workspace)
