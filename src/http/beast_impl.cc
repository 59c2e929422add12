// Beast's and Asio SSL's implementations, compiled once (BOOST_BEAST_SEPARATE_COMPILATION and
// BOOST_ASIO_SEPARATE_COMPILATION, set on hots3_asio). Only src/http uses Beast and TLS.
#include <boost/asio/ssl/impl/src.hpp>
#include <boost/beast/src.hpp>
