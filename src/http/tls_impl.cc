// Asio SSL's implementation, compiled once (BOOST_ASIO_SEPARATE_COMPILATION, set on hots3_asio):
// with the server and client that use TLS, not with the request framing the fuzz harness links.
#include <boost/asio/ssl/impl/src.hpp>
