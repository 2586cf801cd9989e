/* tgdebug with a deliberately wrong rewrite, for tests/tools/tgdebug.sh:
 * `test_broken_exp` (pass canonicalize) replaces exp(x) by expm1(x),
 * which is off by one everywhere. `tgdebug compare` must name exactly
 * this rewrite and the exp node it removed. Built only with the tests;
 * the rule goes in through the optimizer's test-only hook
 * (tg_rw_test_rule_set), so no library build carries it. */
#include "rewrite/engine.h"
#include "tgdebug.h"

static int broken_exp(tg_rw *rw, tg_node *n) {
    tg_var *v = tg_rw_op1(rw, "expm1", n->inputs[0], NULL);
    int rc = tg_rw_replace(rw, n->outputs[0], v);
    return rc ? rc : 1;
}

static const tg_rw_rule broken = {"test_broken_exp", "canonicalize", NULL, "exp", broken_exp};

int main(int argc, char **argv) {
    tg_rw_test_rule_set(&broken);
    return tgdebug_main(argc, argv);
}
