// Asio's implementation, compiled once (BOOST_ASIO_SEPARATE_COMPILATION, set on hots3_asio).
#include <boost/asio/impl/src.hpp>
