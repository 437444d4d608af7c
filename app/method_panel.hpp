// The compression method panel above the results: method (pca, svd, tt), its
// rank or TT accuracy eps, and Run. It only collects the choice; the main
// window queues the job.
#pragma once

#include <QWidget>

class QComboBox;
class QDoubleSpinBox;
class QPushButton;
class QSpinBox;

namespace embedlab::app {

class MethodPanel : public QWidget {
    Q_OBJECT
public:
    explicit MethodPanel(QWidget* parent = nullptr);
    void setDimension(int d); // rank range 1..d
    QString method() const;
    int rank() const;
    double eps() const;
    void setMethod(const QString& method);
    void setRank(int k);
    void setEps(double eps);

public slots:
    void run(); // emits runRequested with the current choice

signals:
    void runRequested(const QString& method, int rank, double eps);

private:
    void showOptionsFor(const QString& method);

    QComboBox* method_;
    QSpinBox* rank_;
    QDoubleSpinBox* eps_;
    QPushButton* run_;
};

} // namespace embedlab::app
