// PLACEHOLDER: replaced by the family implementation.
#include "candle/candle.h"
#include <ostream>
#include <string>
namespace candle {
std::ostream& operator<<(std::ostream&, const Tensor&) { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
PrintOptions print_options() { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
void set_print_options(const PrintOptions&) { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
void set_print_options_default() { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
void set_print_options_short() { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
void set_print_options_full() { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
std::string to_string(const Tensor&) { throw Error(ErrorKind::UnsupportedOp, "not implemented yet"); }
}  // namespace candle
