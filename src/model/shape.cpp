// ModelShape helpers; the value itself is filled by a model family (model/family.h).
#include "model/shape.h"

#include "core/errors.h"

namespace vispco {

int64_t ModelShape::grid_side() const {
  if (grid_rows != grid_cols)
    throw ConfigError(architecture + ": this needs a square visual-token grid, the model's is " +
                      std::to_string(grid_rows) + "×" + std::to_string(grid_cols));
  return grid_rows;
}

}  // namespace vispco
