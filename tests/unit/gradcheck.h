/* The finite-difference gradient checker the gradient tests share: graph
 * text helpers, and check_case, which compares grad's result with central
 * finite differences of the forward function (float64). The differences
 * use only the forward kernels, so they are independent of the gradient
 * rules under test. */
#ifndef TG_GRADCHECK_H
#define TG_GRADCHECK_H

#include <stdint.h>

#define V(id, shape) "{\"id\":\"" id "\",\"type\":{\"dtype\":\"float64\",\"shape\":" shape "}}"
#define N1(op, x, y) "{\"op\":\"" op "\",\"inputs\":[\"" x "\"],\"outputs\":[\"" y "\"]}"
#define N2(op, x, y, z) "{\"op\":\"" op "\",\"inputs\":[\"" x "\",\"" y "\"],\"outputs\":[\"" z "\"]}"
#define NA(op, x, y, attrs) "{\"op\":\"" op "\",\"inputs\":[\"" x "\"],\"outputs\":[\"" y "\"],\"attrs\":" attrs "}"
/* c = sum(sin(y)): a weighting that differs per element. */
#define COST(y) N1("sin", y, "sy") "," N1("sum", "sy", "c")
#define J(...) #__VA_ARGS__

/* Inputs drawn from (lo, hi); returns 1 (and prints the first mismatch)
 * when the symbolic and numeric gradients differ, else 0. */
int check_case(const char *name, const char *vars, const char *nodes, double lo, double hi);
double gc_urand(uint64_t *s);

#endif
