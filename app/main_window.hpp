// The main window: the model panel (facts + parameter breakdown), the
// spectrum and IPRS allocation views, and the job list. Every engine call runs
// as a job on the JobController's engine thread; the GUI thread never blocks.
#pragma once

#include <QElapsedTimer>
#include <QHash>
#include <QLabel>
#include <QMainWindow>

#include "job_controller.hpp"
#include "model_summary.hpp"

class QTabWidget;
class QTreeWidget;
class QTreeWidgetItem;

namespace embedlab::views {
class ParameterBreakdownChart;
class RankAllocationView;
class SpectrumView;
} // namespace embedlab::views

namespace embedlab::app {

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(QWidget* parent = nullptr);
    void openModel(const QString& path);
    bool showView(const QString& name); // "model", "spectrum", "allocation"
    JobController& jobs() { return jobs_; }
    views::SpectrumView* spectrumView() const { return spectrum_; }
    views::RankAllocationView* allocationView() const { return allocation_; }

signals:
    void modelShown(bool ok);

private:
    void showSummary(const ModelSummary& s);
    void analyse(const QString& path); // spectrum + importance jobs for the shown model
    void chooseModelDirectory();
    void chooseModelFile();
    void trackJobs();

    QTabWidget* tabs_;
    QLabel* facts_;
    views::ParameterBreakdownChart* chart_;
    views::SpectrumView* spectrum_;
    views::RankAllocationView* allocation_;
    QTreeWidget* job_list_;
    QHash<int, QTreeWidgetItem*> job_items_;
    QHash<int, QElapsedTimer> job_clocks_;
    JobController jobs_;
};

} // namespace embedlab::app
