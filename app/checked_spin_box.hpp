// Spin boxes that say no. QSpinBox drops a keystroke that would leave its range,
// so "500" typed where d = 128 silently becomes 50 and runs. These keep the
// problem instead: the box is framed in red, its tooltip and problem() name the
// typed value and the range, and whoever runs the choice refuses while a visible
// box has a problem (MethodPanel::run, the Fourier and LLE updates).
#pragma once

#include <QDoubleSpinBox>
#include <QSpinBox>

namespace embedlab::app {

class CheckedSpinBox : public QSpinBox {
    Q_OBJECT
public:
    explicit CheckedSpinBox(QWidget* parent = nullptr);
    QString problem() const { return problem_; } // "" while the typed value is in range
    QValidator::State validate(QString& text, int& pos) const override;

signals:
    void problemChanged(const QString& problem);

private:
    void setProblem(const QString& problem) const;
    mutable QString problem_;
};

class CheckedDoubleSpinBox : public QDoubleSpinBox {
    Q_OBJECT
public:
    explicit CheckedDoubleSpinBox(QWidget* parent = nullptr);
    QString problem() const { return problem_; }
    QValidator::State validate(QString& text, int& pos) const override;

signals:
    void problemChanged(const QString& problem);

private:
    void setProblem(const QString& problem) const;
    mutable QString problem_;
};

// The first problem among `boxes` that are visible ("" if none).
QString first_problem(const QList<QWidget*>& boxes);

} // namespace embedlab::app
