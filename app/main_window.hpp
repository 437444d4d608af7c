// The main window: for now the model panel (facts + parameter breakdown chart).
// Models load on a worker thread; the GUI thread never blocks on the engine.
#pragma once

#include <QFutureWatcher>
#include <QLabel>
#include <QMainWindow>

#include "model_summary.hpp"

namespace embedlab::views {
class ParameterBreakdownChart;
}

namespace embedlab::app {

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    explicit MainWindow(QWidget* parent = nullptr);
    void openModel(const QString& path);

signals:
    void modelShown(bool ok);

private:
    void showSummary(const ModelSummary& s);
    void chooseModelDirectory();
    void chooseModelFile();

    QLabel* facts_;
    views::ParameterBreakdownChart* chart_;
    QFutureWatcher<ModelSummary> loading_;
};

} // namespace embedlab::app
