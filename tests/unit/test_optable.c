/* The op table: every op of this build has type inference, a CPU kernel
 * and a cost estimate; names are unique; misspelt names get the nearest
 * FORMAT.md name; FORMAT.md names not built yet are known as planned. */
#include <string.h>

#include "ops/op.h"
#include "testutil.h"

static void test_every_op_is_complete(void **state) {
    (void)state;
    int n = tg_op_count();
    assert_true(n >= 100);
    for (int i = 0; i < n; i++) {
        const tg_op *op = tg_op_at(i);
        if (!op->infer || !op->run || !op->cost) fail_msg("op '%s' lacks infer, run or cost", op->name);
        if (op->attr_keys && !op->parse_attrs) fail_msg("op '%s' has attrs but no parser", op->name);
        if (!tg_op_is_planned(op->name)) fail_msg("op '%s' is not a FORMAT.md op", op->name);
        for (int j = 0; j < i; j++)
            if (!strcmp(op->name, tg_op_at(j)->name)) fail_msg("op '%s' is listed twice", op->name);
        assert_ptr_equal(tg_op_find(op->name), op);
    }
    printf("  %d ops, each with infer, run and cost\n", n);
}

static void test_names(void **state) {
    (void)state;
    assert_string_equal(tg_op_nearest("dott"), "dot");
    assert_string_equal(tg_op_nearest("softmx"), "softmax");
    assert_string_equal(tg_op_nearest("matmull"), "matmul");
    assert_null(tg_op_find("dott"));
    assert_true(tg_op_is_planned("scan"));
    assert_false(tg_op_is_planned("dott"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_op_is_complete),
        cmocka_unit_test(test_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
