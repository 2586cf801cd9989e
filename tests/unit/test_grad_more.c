/* Gradients of the ops that rules_more.c covers (var/std, batched matmul,
 * the build ops, convolution and pooling, linear algebra, debugging ops)
 * against central finite differences of the forward function (float64),
 * on shapes that broadcast and through strided views. The checker is
 * test_grad.c's: the finite differences use only the forward kernels. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"
#include "testutil.h"



#define I64V(shape, data) "{\"value\":{\"dtype\":\"int64\",\"shape\":" shape ",\"data\":" data "}}"
/* A + 3 I: well conditioned, and positive definite in the triangle that
 * cholesky reads when A's entries are in [-0.5, 0.5]. */
#define SHIFT3(a, y) "{\"op\":\"eye\",\"inputs\":[{\"value\":3},{\"value\":3},{\"value\":0}],\"outputs\":[\"I3\"]}," \
    "{\"op\":\"mul\",\"inputs\":[\"I3\",{\"value\":3}],\"outputs\":[\"I3s\"]}," N2("add", a, "I3s", y)

static void test_var_std(void **state) {
    (void)state;
    int fails = 0;
    fails += check_case("var_axes_ddof", V("x", "[2,3,4]"),
                        NA("var", "x", "r", J({"axis": [0, 2], "ddof": 1})) "," COST("r"), -1, 1);
    fails += check_case("var_all", V("x", "[2,3]"), NA("var", "x", "r", J({"axis": null})) "," COST("r"), -1, 1);
    fails += check_case("std_keepdims", V("x", "[2,3,4]"),
                        NA("std", "x", "r", J({"axis": -2, "keepdims": true, "ddof": 1})) "," COST("r"), -1, 1);
    fails += check_case("std_strided", V("x", "[3,4]"),
                        N1("transpose", "x", "xt") "," NA("std", "xt", "r", J({"axis": 1})) "," COST("r"), -1, 1);
    /* An empty axis list reduces nothing: the result is 0 whatever x is
     * (np.var(x, axis=())), and so is its gradient. */
    fails += check_case("var_no_axes", V("x", "[2,3]"),
                        NA("var", "x", "r", J({"axis": [], "keepdims": true})) "," COST("r"), -1, 1);
    fails += check_case("var_no_axes_dropped", V("x", "[2,3]"),
                        NA("var", "x", "r", J({"axis": []})) "," COST("r"), -1, 1);
    fails += check_case("std_no_axes", V("x", "[2,3]"), NA("std", "x", "r", J({"axis": []})) "," COST("r"), -1, 1);
    if (fails) fail_msg("%d gradients differ", fails);
}

static void test_products(void **state) {
    (void)state;
    int fails = 0;
    fails += check_case("matmul_batched", V("a", "[2,1,2,3]") "," V("b", "[3,3,2]"),
                        N2("matmul", "a", "b", "y") "," COST("y"), -1, 1);
    fails += check_case("matmul_vec_left", V("a", "[3]") "," V("b", "[2,3,4]"),
                        N2("matmul", "a", "b", "y") "," COST("y"), -1, 1);
    fails += check_case("matmul_vec_right", V("a", "[2,3,4]") "," V("b", "[4]"),
                        N2("matmul", "a", "b", "y") "," COST("y"), -1, 1);
    fails += check_case("matmul_strided", V("a", "[2,3,2]") "," V("b", "[3,4]"),
                        NA("transpose", "a", "at", J({"axes": [0, 2, 1]})) "," N2("matmul", "at", "b", "y") ","
                        COST("y"), -1, 1);
    fails += check_case("outer_matrices", V("a", "[2,2]") "," V("b", "[3]"),
                        N2("outer", "a", "b", "y") "," COST("y"), -1, 1);
    /* np.dot with a 0-d operand is the product */
    fails += check_case("dot_0d_vec", V("a", "[]") "," V("b", "[3]"), N2("dot", "a", "b", "y") "," COST("y"), -1, 1);
    fails += check_case("dot_mat_0d", V("a", "[2,3]") "," V("b", "[]"), N2("dot", "a", "b", "y") "," COST("y"), -1, 1);
    fails += check_case("dot_0d_0d", V("a", "[]") "," V("b", "[]"), N2("dot", "a", "b", "y") "," COST("y"), -1, 1);
    if (fails) fail_msg("%d gradients differ", fails);
}

static void test_build(void **state) {
    (void)state;
    int fails = 0;
    fails += check_case("take", V("x", "[4,3]"),
                        "{\"op\":\"take\",\"inputs\":[\"x\"," I64V("[4]", "[3,0,3,-1]") "],\"outputs\":[\"t\"]},"
                        COST("t"), -1, 1);
    fails += check_case("take_axis1", V("x", "[2,3]"),
                        "{\"op\":\"take\",\"inputs\":[\"x\"," I64V("[2,2]", "[2,0,1,2]") "],\"outputs\":[\"t\"],"
                        "\"attrs\":{\"axis\":1}}," COST("t"), -1, 1);
    fails += check_case("take_set_dups", V("x", "[4,3]") "," V("y", "[3,3]"),
                        "{\"op\":\"take_set\",\"inputs\":[\"x\",\"y\"," I64V("[3]", "[1,-3,2]") "],\"outputs\":[\"t\"]},"
                        COST("t"), -1, 1);
    fails += check_case("take_set_bcast_axis1", V("x", "[2,4]") "," V("y", "[2,1]"),
                        "{\"op\":\"take_set\",\"inputs\":[\"x\",\"y\"," I64V("[3]", "[0,3,0]") "],\"outputs\":[\"t\"],"
                        "\"attrs\":{\"axis\":1}}," COST("t"), -1, 1);
    fails += check_case("take_add", V("x", "[4,3]") "," V("y", "[3]"),
                        "{\"op\":\"take_add\",\"inputs\":[\"x\",\"y\"," I64V("[3]", "[0,0,2]") "],\"outputs\":[\"t\"]},"
                        COST("t"), -1, 1);
    /* y with a leading length-1 axis more than the part it writes, as
     * NumPy's x[2] = y allows: its gradient keeps that axis. */
    fails += check_case("take_set_lead", V("x", "[4,3]") "," V("y", "[1,1,3]"),
                        "{\"op\":\"take_set\",\"inputs\":[\"x\",\"y\"," I64V("[1]", "[2]") "],\"outputs\":[\"t\"]},"
                        COST("t"), -1, 1);
    fails += check_case("set_subtensor_lead", V("x", "[4,3]") "," V("y", "[1,3]"),
                        "{\"op\":\"set_subtensor\",\"inputs\":[\"x\",\"y\"],\"outputs\":[\"t\"],"
                        "\"attrs\":{\"index\":[2]}}," COST("t"), -1, 1);
    fails += check_case("inc_subtensor_lead", V("x", "[4,3]") "," V("y", "[1,1,3]"),
                        "{\"op\":\"inc_subtensor\",\"inputs\":[\"x\",\"y\"],\"outputs\":[\"t\"],"
                        "\"attrs\":{\"index\":[-1]}}," COST("t"), -1, 1);
    fails += check_case("join", V("x", "[2,3]") "," V("y", "[3,2]"),
                        N1("transpose", "y", "yt") ","
                        "{\"op\":\"join\",\"inputs\":[\"x\",\"yt\",\"x\"],\"outputs\":[\"j\"],\"attrs\":{\"axis\":-1}},"
                        COST("j"), -1, 1);
    fails += check_case("stack", V("x", "[2,3]") "," V("y", "[2,3]"),
                        "{\"op\":\"stack\",\"inputs\":[\"x\",\"y\"],\"outputs\":[\"s\"],\"attrs\":{\"axis\":1}},"
                        COST("s"), -1, 1);
    fails += check_case("split", V("x", "[5,2]"),
                        "{\"op\":\"split\",\"inputs\":[\"x\"," I64V("[2]", "[2,3]") "],\"outputs\":[\"s1\",\"s2\"],"
                        "\"attrs\":{\"axis\":0,\"n\":2}}," COST("s2"), -1, 1);
    fails += check_case("split_both", V("x", "[2,5]"),
                        "{\"op\":\"split\",\"inputs\":[\"x\"," I64V("[2]", "[4,1]") "],\"outputs\":[\"s1\",\"s2\"],"
                        "\"attrs\":{\"axis\":1,\"n\":2}}," N1("sum", "s1", "c1") "," N1("sin", "s2", "q") ","
                        N1("sum", "q", "c2") "," N2("mul", "c1", "c2", "c"), -1, 1);
    fails += check_case("alloc", V("v", "[1,3]"),
                        "{\"op\":\"alloc\",\"inputs\":[\"v\",{\"value\":2},{\"value\":2},{\"value\":3}],\"outputs\":[\"a\"]},"
                        COST("a"), -1, 1);
    fails += check_case("repeat_axis", V("x", "[2,3]"),
                        "{\"op\":\"repeat\",\"inputs\":[\"x\",{\"value\":2}],\"outputs\":[\"r\"],\"attrs\":{\"axis\":1}},"
                        COST("r"), -1, 1);
    fails += check_case("repeat_counts", V("x", "[3,2]"),
                        "{\"op\":\"repeat\",\"inputs\":[\"x\"," I64V("[3]", "[1,0,3]") "],\"outputs\":[\"r\"],"
                        "\"attrs\":{\"axis\":0}}," COST("r"), -1, 1);
    fails += check_case("repeat_flat", V("x", "[2,3]"),
                        N1("transpose", "x", "xt") ","
                        "{\"op\":\"repeat\",\"inputs\":[\"xt\",{\"value\":2}],\"outputs\":[\"r\"]}," COST("r"), -1, 1);
    /* arange(s, 2.5, st + 0.8): out[i] = s + i * step (Theano's ARange
     * gradient; stop only sets the length). */
    fails += check_case("arange", V("s", "[]") "," V("st", "[]"),
                        "{\"op\":\"add\",\"inputs\":[\"st\",{\"value\":0.8}],\"outputs\":[\"step\"]},"
                        "{\"op\":\"arange\",\"inputs\":[\"s\",{\"value\":2.5},\"step\"],\"outputs\":[\"r\"]},"
                        COST("r"), -0.5, 0.5);
    if (fails) fail_msg("%d gradients differ", fails);
}

static void test_conv_pool(void **state) {
    (void)state;
    int fails = 0;
    fails += check_case("conv2d", V("x", "[2,2,5,5]") "," V("w", "[3,2,2,2]"),
                        N2("conv2d", "x", "w", "y") "," COST("y"), -1, 1);
    fails += check_case("conv2d_half_sub", V("x", "[1,2,5,6]") "," V("w", "[2,2,3,3]"),
                        "{\"op\":\"conv2d\",\"inputs\":[\"x\",\"w\"],\"outputs\":[\"y\"],"
                        "\"attrs\":{\"border_mode\":\"half\",\"subsample\":[2,2],\"filter_flip\":false}}," COST("y"), -1, 1);
    fails += check_case("conv2d_grad_inputs", V("w", "[3,2,2,2]") "," V("gy", "[2,3,4,3]"),
                        "{\"op\":\"conv2d_grad_inputs\",\"inputs\":[\"w\",\"gy\"," I64V("[4]", "[2,2,5,4]") "],"
                        "\"outputs\":[\"y\"]}," COST("y"), -1, 1);
    fails += check_case("conv2d_grad_weights", V("x", "[2,2,5,4]") "," V("gy", "[2,3,4,3]"),
                        "{\"op\":\"conv2d_grad_weights\",\"inputs\":[\"x\",\"gy\"," I64V("[4]", "[3,2,2,2]") "],"
                        "\"outputs\":[\"y\"]}," COST("y"), -1, 1);
    fails += check_case("conv2d_grad_inputs_full", V("w", "[2,1,2,3]") "," V("gy", "[1,2,4,4]"),
                        "{\"op\":\"conv2d_grad_inputs\",\"inputs\":[\"w\",\"gy\"," I64V("[4]", "[1,1,3,2]") "],"
                        "\"outputs\":[\"y\"],\"attrs\":{\"border_mode\":\"full\"}}," COST("y"), -1, 1);
    const char *modes[] = {"max", "sum", "average_inc_pad", "average_exc_pad"};
    const char *cfg[] = {"\"ws\":[2,2],\"stride\":[1,2],\"pad\":[1,0],\"ignore_border\":true",
                         "\"ws\":[2,2],\"ignore_border\":false"};
    char nodes[2048];
    for (int m = 0; m < 4; m++)
        for (int c = 0; c < 2; c++) {
            snprintf(nodes, sizeof nodes,
                     "{\"op\":\"pool2d\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{%s,\"mode\":\"%s\"}},"
                     COST("y"), cfg[c], modes[m]);
            fails += check_case(modes[m], V("x", "[1,2,4,5]"), nodes, -1, 1);
            /* pool2d_grad is linear in gy; x and y only route it. Max mode:
             * overlapping windows (config 0, pool2d_grad_grad) and not
             * (config 1, a masked sum pooling). */
            snprintf(nodes, sizeof nodes,
                     "{\"op\":\"pool2d\",\"inputs\":[\"x\"],\"outputs\":[\"y\"],\"attrs\":{%s,\"mode\":\"%s\"}},"
                     "{\"op\":\"pool2d_grad\",\"inputs\":[\"x\",\"y\",\"gy\"],\"outputs\":[\"z\"],"
                     "\"attrs\":{%s,\"mode\":\"%s\"}}," COST("z"),
                     cfg[c], modes[m], cfg[c], modes[m]);
            fails += check_case(modes[m], c ? V("x", "[1,2,4,5]") "," V("gy", "[1,2,2,3]")
                                            : V("x", "[1,2,4,5]") "," V("gy", "[1,2,5,2]"),
                                nodes, -1, 1);
        }
    if (fails) fail_msg("%d gradients differ", fails);
}

static void test_linalg(void **state) {
    (void)state;
    int fails = 0;
    fails += check_case("matrix_inverse", V("a", "[3,3]"), SHIFT3("a", "s") "," N1("matrix_inverse", "s", "y") "," COST("y"), -0.5, 0.5);
    fails += check_case("det", V("a", "[3,3]"), SHIFT3("a", "s") "," N1("det", "s", "y") "," COST("y"), -0.5, 0.5);
    fails += check_case("det_strided", V("a", "[3,3]"),
                        SHIFT3("a", "s") "," N1("transpose", "s", "st") "," N1("det", "st", "y") "," COST("y"), -0.5, 0.5);
    fails += check_case("solve_vec", V("a", "[3,3]") "," V("b", "[3]"),
                        SHIFT3("a", "s") "," N2("solve", "s", "b", "y") "," COST("y"), -0.5, 0.5);
    fails += check_case("solve_mat", V("a", "[3,3]") "," V("b", "[3,2]"),
                        SHIFT3("a", "s") "," N2("solve", "s", "b", "y") "," COST("y"), -0.5, 0.5);
    fails += check_case("inverse_batched", V("a", "[2,3,3]"), SHIFT3("a", "s") "," N1("matrix_inverse", "s", "y") "," COST("y"), -0.5, 0.5);
    fails += check_case("det_batched", V("a", "[2,3,3]"), SHIFT3("a", "s") "," N1("det", "s", "y") "," COST("y"), -0.5, 0.5);
    fails += check_case("solve_batched_shared", V("a", "[2,3,3]") "," V("b", "[3]"),
                        SHIFT3("a", "s") "," N2("solve", "s", "b", "y") "," COST("y"), -0.5, 0.5);
    fails += check_case("solve_batched_mat", V("a", "[2,3,3]") "," V("b", "[2,3,2]"),
                        SHIFT3("a", "s") "," N2("solve", "s", "b", "y") "," COST("y"), -0.5, 0.5);
    /* Batch dimensions that broadcast (NumPy's gufunc rules): each
     * gradient sums back over the batches its input was stretched to. */
    static const char *const bcast[][2] = {
        {V("a", "[2,3,3]"), V("b", "[3,2]")},   {V("a", "[1,3,3]"), V("b", "[2,3,2]")},
        {V("a", "[2,1,3,3]"), V("b", "[4,3,1]")}, {V("a", "[3,3]"), V("b", "[2,3,2]")},
        {V("a", "[2,2,3,3]"), V("b", "[3]")},    {V("a", "[3,1,3,3]"), V("b", "[1,2,3,2]")},
    };
    for (size_t i = 0; i < sizeof bcast / sizeof bcast[0]; i++) {
        char vars[512];
        snprintf(vars, sizeof vars, "%s,%s", bcast[i][0], bcast[i][1]);
        fails += check_case("solve_broadcast", vars, SHIFT3("a", "s") "," N2("solve", "s", "b", "y") "," COST("y"),
                            -0.5, 0.5);
    }
    /* "sym" and "pos" read the upper triangle of a matrix that is not
     * symmetric (SciPy's default): its lower entries get no gradient,
     * each upper one that of both its places. */
    const char *modes[] = {"sym", "pos"};
    for (int m = 0; m < 2; m++) {
        char nodes[1024];
        snprintf(nodes, sizeof nodes,
                 SHIFT3("a", "s") ",{\"op\":\"solve\",\"inputs\":[\"s\",\"b\"],\"outputs\":[\"y\"],"
                 "\"attrs\":{\"assume_a\":\"%s\"}}," COST("y"), modes[m]);
        fails += check_case(modes[m], V("a", "[3,3]") "," V("b", "[3]"), nodes, -0.5, 0.5);
        fails += check_case(modes[m], V("a", "[3,3]") "," V("b", "[3,2]"), nodes, -0.5, 0.5);
        fails += check_case(modes[m], V("a", "[2,3,3]") "," V("b", "[3]"), nodes, -0.5, 0.5);
        fails += check_case(modes[m], V("a", "[2,3,3]") "," V("b", "[2,3,2]"), nodes, -0.5, 0.5);
        fails += check_case(modes[m], V("a", "[2,1,3,3]") "," V("b", "[3,3,2]"), nodes, -0.5, 0.5);
        fails += check_case(modes[m], V("a", "[3,3]") "," V("b", "[2,3,1]"), nodes, -0.5, 0.5);
    }
    fails += check_case("cholesky_batched", V("a", "[2,3,3]"), SHIFT3("a", "s") "," N1("cholesky", "s", "y") "," COST("y"), -0.5, 0.5);
    fails += check_case("cholesky_lower", V("a", "[3,3]"), SHIFT3("a", "s") "," N1("cholesky", "s", "y") "," COST("y"), -0.5, 0.5);
    fails += check_case("cholesky_upper", V("a", "[3,3]"),
                        SHIFT3("a", "s") "," NA("cholesky", "s", "y", J({"lower": false})) "," COST("y"), -0.5, 0.5);
    if (fails) fail_msg("%d gradients differ", fails);
}

/* A composite a frontend wrote, whose output reaches an input that
 * broadcasts through unary nodes only (tanh(b)) and through a binary one
 * (a * exp(b)): each input's gradient has the input's shape. */
static void test_composite_broadcast(void **state) {
    (void)state;
    int fails = 0;
#define BODY_VARS "\"variables\":[{\"id\":\"p\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}," \
                  "{\"id\":\"q\",\"type\":{\"dtype\":\"float64\",\"shape\":[]}}]"
    fails += check_case("composite_unary", V("a", "[2,3]") "," V("b", "[3]"),
                        "{\"op\":\"composite\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"y\"],\"attrs\":{\"body\":{"
                        BODY_VARS ",\"nodes\":[" N1("tanh", "q", "t") "],\"inputs\":[\"p\",\"q\"],\"outputs\":[\"t\"]}}},"
                        COST("y"), -1, 1);
    fails += check_case("composite_mixed", V("a", "[2,1]") "," V("b", "[3]"),
                        "{\"op\":\"composite\",\"inputs\":[\"a\",\"b\"],\"outputs\":[\"y\",\"z\"],\"attrs\":{\"body\":{"
                        BODY_VARS ",\"nodes\":[" N1("exp", "q", "e") "," N2("mul", "p", "e", "t") "," N1("neg", "p", "u")
                        "],\"inputs\":[\"p\",\"q\"],\"outputs\":[\"t\",\"u\"]}}},"
                        N2("add", "y", "z", "w") "," COST("w"), -1, 1);
#undef BODY_VARS
    if (fails) fail_msg("%d gradients differ", fails);
}

static void test_debug(void **state) {
    (void)state;
    int fails = 0;
    fails += check_case("print", V("x", "[2,3]"),
                        NA("print", "x", "p", J({"message": "grad test", "show": []})) "," COST("p"), -1, 1);
    fails += check_case("assert", V("x", "[2,3]"),
                        "{\"op\":\"assert\",\"inputs\":[\"x\",{\"value\":true}],\"outputs\":[\"p\"]}," COST("p"), -1, 1);
    fails += check_case("breakpoint", V("x", "[2,3]") "," V("y", "[3]"),
                        "{\"op\":\"gt\",\"inputs\":[\"y\",{\"value\":5}],\"outputs\":[\"m\"]},"
                        N1("any", "m", "cond") ","
                        "{\"op\":\"breakpoint\",\"inputs\":[\"cond\",\"x\",\"y\"],\"outputs\":[\"bx\",\"by\"]},"
                        N2("mul", "bx", "by", "z") "," COST("z"), -1, 1);
    if (fails) fail_msg("%d gradients differ", fails);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_var_std),  cmocka_unit_test(test_products), cmocka_unit_test(test_build),
        cmocka_unit_test(test_conv_pool), cmocka_unit_test(test_linalg),  cmocka_unit_test(test_debug),
        cmocka_unit_test(test_composite_broadcast),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
