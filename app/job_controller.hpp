// Runs engine jobs one at a time on a background engine thread (a worker
// object on a QThread), queued in order. Progress, results and errors come
// back as signals on the GUI thread; cancel() sets an atomic flag that the
// job's progress callback turns into embedlab::Cancelled. The GUI thread
// never waits for a job.
//
//   controller.submit("spectrum", [path](const embedlab::ProgressFn& progress) {
//       auto r = compute(path, progress);                 // engine thread
//       return [r] { view->setData(r); };                 // then GUI thread
//   });
#pragma once

#include <QObject>
#include <QString>
#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>

#include "embedlab/error.hpp"

class QThread;

namespace embedlab::app {

class JobController : public QObject {
    Q_OBJECT
public:
    // Runs on the engine thread; the returned function runs on the GUI thread.
    using Work = std::function<std::function<void()>(const ProgressFn& progress)>;

    explicit JobController(QObject* parent = nullptr);
    ~JobController() override; // cancels the running job and waits for it

    int submit(const QString& name, Work work); // returns the job id
    void cancel(int id);                        // queued: dropped; running: asked to stop
    // Queues an ended job's work again under a new id (-1: unknown, queued or running).
    int resubmit(int id);
    bool idle() const { return running_ < 0 && queue_.empty(); }
    // The longest a job's result took on the GUI thread (its returned function
    // and the finished() slots), to tell a stall's own work from the engine
    // thread's competition for the cores.
    struct Delivery {
        QString name;
        double ms = 0;
    };
    Delivery slowestDelivery() const { return slowest_delivery_; }
    int running() const { return running_; }

signals:
    void queued(int id, const QString& name);
    void started(int id);
    void progress(int id, qint64 done, qint64 total); // at most every 50 ms
    void finished(int id, double seconds);
    void failed(int id, const QString& message);
    void cancelled(int id);

private:
    struct Job {
        int id;
        QString name;
        Work work;
    };
    void startNext();
    void jobEnded(int id);

    QThread* thread_;
    QObject* worker_; // lives on thread_
    std::deque<Job> queue_;
    std::map<int, Job> submitted_; // every job's work, for resubmit()
    int next_id_ = 1;
    int running_ = -1;
    std::shared_ptr<std::atomic<bool>> cancel_;
    Delivery slowest_delivery_;
};

} // namespace embedlab::app
