// The Jobs dock's list: one compact line per job (name, state, a progress bar
// with its percentage beside it, time), a failed job's whole error on a wrapped
// line under it (never cut off: the line grows with the text, and the tooltip
// and Copy error have it too), and what can be done to a job in its right-click
// menu (Re-run, Cancel, Copy error) rather than a column of buttons. It follows
// the JobController's signals itself; the window asks for a cancel's "cancelling"
// and a running job's own status (a Slurm task's).
//
//   auto* list = new JobList(controller, dock);
//   connect(list, &JobList::cancelRequested, window, &MainWindow::cancelJob);
#pragma once

#include <QElapsedTimer>
#include <QHash>
#include <QSet>
#include <QTreeWidget>

class QMenu;

namespace embedlab::app {

class JobController;

class JobList : public QTreeWidget {
    Q_OBJECT
public:
    enum Column { kName, kState, kProgress, kTime };
    static constexpr int kIdRole = Qt::UserRole + 1;       // a job's line: its id
    static constexpr int kProgressRole = Qt::UserRole + 2; // 0..1000
    static constexpr int kErrorRole = Qt::UserRole + 3;    // an error's line: the message

    explicit JobList(JobController& jobs, QWidget* parent = nullptr);
    QTreeWidgetItem* item(int id) const { return items_.value(id); }
    int jobOf(const QTreeWidgetItem* item) const; // an error line's: its job's; -1: none
    QString error(int id) const { return errors_.value(id); }
    // Says "cancelling" until the job has stopped (its progress keeps coming).
    void setCancelling(int id);
    bool cancelling(int id) const { return cancelling_.contains(id); }
    // A running job's own state instead of "running" (until it ends).
    void setStatus(int id, const QString& status);
    // The right-click menu of a line (the caller owns it): Re-run, Cancel, Copy error.
    QMenu* menuFor(QTreeWidgetItem* item, QWidget* parent);
    // Where a progress cell draws its bar, and its percentage beside it (not over it).
    static QRect barRect(const QRect& cell, const QFontMetrics& metrics);
    static QRect percentRect(const QRect& cell, const QFontMetrics& metrics);
    // The Time column: the elapsed time and, once a running job has done `fraction` (0..1]
    // for a few seconds, the time left at that pace ("20.0 s, about 3 min left").
    static QString timeText(qint64 elapsed_ms, double fraction);

signals:
    void cancelRequested(int id);

protected:
    void contextMenuEvent(QContextMenuEvent* event) override;
    void resizeEvent(QResizeEvent* event) override; // wrapped errors refit the width

private:
    void setState(int id, const QString& state);

    JobController& jobs_;
    QHash<int, QTreeWidgetItem*> items_;
    QHash<int, QElapsedTimer> clocks_;
    QHash<int, double> fractions_; // a running job's progress, 0..1
    QHash<int, QString> states_;   // queued, running, done, failed, cancelled
    QHash<int, QString> status_;   // a running job's own
    QHash<int, QString> errors_;
    QSet<int> cancelling_;
};

} // namespace embedlab::app
