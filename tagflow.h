#pragma once
// The one header an embedding program includes.

#include "tagflow/engine/config.h"
#include "tagflow/engine/context.h"
#include "tagflow/engine/engine.h"
#include "tagflow/engine/error.h"
#include "tagflow/engine/operation.h"
#include "tagflow/storage/memory_stats.h"
#include "tagflow/storage/storage.h"
#include "tagflow/ops/creation.h"
#include "tagflow/ops/device.h"
#include "tagflow/ops/dtype.h"
#include "tagflow/ops/elementwise.h"
#include "tagflow/ops/ndarray.h"
#include "tagflow/ops/shape.h"
#include "tagflow/ops/transpose.h"
