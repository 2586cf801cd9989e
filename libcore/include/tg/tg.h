/* tg/tg.h: the whole public API of libtg. */
#ifndef TG_TG_H
#define TG_TG_H

#include "tg/status.h"
#include "tg/dtype.h"
#include "tg/array.h"
#include "tg/graph.h"
#include "tg/function.h"
#include "tg/grad.h"
#include "tg/profile.h"
#include "tg/tgf.h"
#include "tg/debug.h"

#endif
