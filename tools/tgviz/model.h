/* tgviz's drawing model: the nodes and edges of one graph as JSON objects
 * (what the page reads), laid out by Graphviz's dot in C.
 *
 * A drawing has one node per apply node ("a:<key>", the key being the id
 * of its first output), one per variable that no node produces (input,
 * constant, shared: "v:<id>"), and one per function output or update
 * ("o:<id>", "u:<shared id>"). A leaf that more than VZ_SHARE_MAX nodes
 * read is drawn once beside each of them instead ("v:<id>" for the first
 * reader, "c<k>:<id>" for the k-th), so that no edge runs the depth of the
 * drawing from a weight every layer reads. Edges carry the variable between them with
 * its dtype and static shape, and say whether the target views or
 * destroys it.
 */
#ifndef TGVIZ_MODEL_H
#define TGVIZ_MODEL_H

#include <graphviz/gvc.h>
#include <json-c/json.h>
#include <stdbool.h>

#include "graph/graph.h"
#include "tg/tg.h"

enum { VZ_SHARE_MAX = 4 };

/* How a drawing is laid out: dot up to VZ_DOT_MAX nodes whose edges
 * cross at most VZ_DOT_CROSSINGS_MAX ranks in all (vz_long_edges), and
 * the linear layered layout (layers.c) beyond, or one of them always.
 * dot on this VM: an MLP's training graph of 200 nodes crossing 3,350
 * ranks 1.5 s, 220 crossing 4,200 2.8 s, 330 crossing 9,500 48 s. */
typedef enum { VZ_LAYOUT_AUTO, VZ_LAYOUT_DOT, VZ_LAYOUT_LAYERS } vz_layout_kind;
enum { VZ_DOT_MAX = 2000, VZ_DOT_CROSSINGS_MAX = 3000 };

typedef struct vz_graph {
    Agraph_t *ag;
    json_object *nodes; /* array of node objects, owned */
    json_object *edges; /* array of edge objects, owned */
    long nedges;
    bool for_page; /* straight edges (the page draws its own) */
    /* Laid-out bodies, closed only with this graph: Graphviz 2.43 frees
     * attribute symbols the other root graphs still use when a graph is
     * closed, so closing a body's graph before this one is rendered made
     * the render read freed memory. */
    Agraph_t **subs;
    int nsubs;
    /* Leaves read by many nodes, drawn beside each reader: how many nodes
     * read each leaf, and how many copies of it are drawn so far (id ->
     * count). */
    struct tg_idmap *readers, *copies;
    /* The ids drawn (id -> position in nodes + 1); ag gets its nodes and
     * edges only when a layout or a picture needs them (model.c). */
    struct tg_idmap *drawn;
    bool ag_built;
    vz_layout_kind layout; /* set after vz_init; bodies inherit it */
    bool layered;          /* vz_layout used layers.c */
    /* The drawings of the distinct nested bodies met so far, by their
     * JSON text (the top graph's, which its bodies use too): each is
     * drawn and laid out once, written once in the view's "bodies", and
     * each node with that body gets a reference to it (model.c). */
    struct vz_bodies *bodies;
    bool nested; /* a body's drawing: the top graph writes the bodies */
    /* The loaded nodes that hold a body, by their key in this drawing
     * (key -> const tg_node *): where vz_layout finds the types the
     * library inferred for a body. */
    struct tg_idmap *holders;
    /* A body's drawing: the node whose body it is (NULL: the body's JSON
     * alone, its declared types). */
    const tg_node *owner;
    /* The graph as loaded, when there is one (borrowed; may be NULL): the
     * creation traces of the original nodes a fused node's body nodes
     * stand for. */
    const tg_graph *orig;
} vz_graph;

/* The family of an op for colouring and collapsing: the .def file that
 * lists it, as tgprof's op classes ("elemwise", "reduce", "blas",
 * "shape", "build", "nn", "conv", "linalg", "random", "debug", "grad",
 * "composite", "transfer", "control" for ifelse, op_from_graph and
 * scan); "other" for an op this build does not know (a nested body may
 * name one). */
const char *vz_op_family(const char *op);

/* Draw the graph as loaded, marking the outputs and updates of function
 * fi (or none when fi < 0). */
int vz_from_graph(vz_graph *vg, const tg_graph *g, int fi, tg_ctx *ctx);
/* Draw a compiled function's function graph; each apply node lists the
 * keys of the original nodes it stands for. */
int vz_from_function(vz_graph *vg, const tg_function *f, tg_ctx *ctx);

/* Draw a nested body from its JSON (FORMAT.md s7: variables, nodes,
 * inputs, outputs), ids prefixed with prefix ("a:<prefix>/<key>"). Its
 * variables get the types the library inferred for vg->owner's body
 * (the body a scan or op_from_graph loaded; a composite's scalars with
 * the broadcast shapes of the node's inputs), else those the JSON
 * declares, else none (drawn as unknown: "?"). A malformed body is drawn
 * as far as it goes; always 0. */
int vz_from_body(vz_graph *vg, json_object *body, const char *prefix);

/* Lay the drawing out with dot and store x, y (centre, y down), w, h in
 * points on every node, and the drawing's width and height. Nested bodies
 * (attrs.body) are drawn and laid out the same way into node.body. */
int vz_layout(vz_graph *vg, GVC_t *gvc, json_object *out, tg_ctx *ctx);

void vz_init(vz_graph *vg, const char *name, bool for_page);

/* An edge of a drawing (an element of vz_graph.edges): from node src to
 * node dst, carrying variable var of dtype and shape (borrowed; NULL:
 * none) into input `index` of dst; mode "view", "destroy" or NULL. It is
 * a small json_object that json-c writes out as {source, target, var,
 * dtype, shape, label, index[, mode]}; vz_edge_ends reads its ends
 * (false for any other object). NULL when out of memory. */
json_object *vz_edge_new(const char *src, const char *dst, const char *var, const char *dtype, json_object *shape,
                         int index, const char *mode);
bool vz_edge_ends(json_object *edge, const char **src, const char **dst);

/* The layered layout of layers.c: x, y, w, h on every node, and the
 * drawing's size. -1 when out of memory. */
int vz_layers(vz_graph *vg, double *width, double *height);
/* The virtual nodes dot would put on the edges longer than one rank, with
 * the ranks the layered layout gives (longest path: dot's own ranks are
 * no longer in all, so this bounds its count). -1 when out of memory. */
long vz_long_edges(vz_graph *vg);

/* Write the page (tools/tgviz/page.c) with `data` (the drawing's JSON,
 * as json-c writes it: "</script>" cannot occur in it) to out. -1 when a
 * write fails. */
int vz_page_write(FILE *out, const char *data);
void vz_free(vz_graph *vg);

#endif
