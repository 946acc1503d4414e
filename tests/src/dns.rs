//! A DNS server for tests, on loopback: it answers every A query with the next address of a
//! list, round and round, so that one name resolves differently on each query (as a DNS
//! rebinding attacker's does). It counts the queries it answered.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use hickory_resolver::proto::op::Message;
use hickory_resolver::proto::rr::rdata::A;
use hickory_resolver::proto::rr::{RData, Record, RecordType};

pub struct RotatingDns {
    pub addr: SocketAddr,
    queries: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl RotatingDns {
    /// Answers A queries for any name with `answers[n % len]` for the n-th A query (time to
    /// live 0, so nobody should keep it), and other types with no records.
    pub async fn start(answers: Vec<Ipv4Addr>) -> anyhow::Result<RotatingDns> {
        anyhow::ensure!(!answers.is_empty(), "at least one answer");
        let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await?;
        let addr = socket.local_addr()?;
        let queries = Arc::new(AtomicUsize::new(0));
        let counter = queries.clone();
        let task = tokio::spawn(async move {
            let mut buffer = [0u8; 1500];
            loop {
                let Ok((n, peer)) = socket.recv_from(&mut buffer).await else {
                    return;
                };
                let Ok(query) = Message::from_vec(&buffer[..n]) else {
                    continue;
                };
                let Some(question) = query.queries.first().cloned() else {
                    continue;
                };
                let mut response = Message::response(query.metadata.id, query.metadata.op_code);
                response.metadata.recursion_desired = query.metadata.recursion_desired;
                response.metadata.recursion_available = true;
                response.metadata.authoritative = true;
                response.add_query(question.clone());
                if question.query_type() == RecordType::A {
                    let n = counter.fetch_add(1, Ordering::SeqCst);
                    let ip = answers[n % answers.len()];
                    response.add_answer(Record::from_rdata(
                        question.name().clone(),
                        0,
                        RData::A(A(ip)),
                    ));
                }
                if let Ok(bytes) = response.to_vec() {
                    let _ = socket.send_to(&bytes, peer).await;
                }
            }
        });
        Ok(RotatingDns {
            addr,
            queries,
            task,
        })
    }

    /// A queries answered so far.
    pub fn queries(&self) -> usize {
        self.queries.load(Ordering::SeqCst)
    }
}

impl Drop for RotatingDns {
    fn drop(&mut self) {
        self.task.abort();
    }
}
